// An OpenAI-compatible chat-completions server over node-llama-cpp, on loopback only.
//
//   node server.mjs --model FILE.gguf [--port 8089] [--host 127.0.0.1] [--threads 2]
//                   [--context 4096] [--max-tokens 512] [--max-items 4] [--max-string 300]
//
// Routes: GET /v1/models, GET /health, POST /v1/chat/completions (non-streaming). A
// `response_format` of type `json_schema` (or `json_object`) becomes a llama.cpp grammar, so
// the answer is constrained to the schema while it is generated (the subset node-llama-cpp
// supports: anyOf is read as oneOf; range and pattern keywords are dropped, and the client
// still validates them). A small model at temperature 0 tends to repeat itself until the token
// limit, so the grammar also bounds every array to --max-items items and every free string to
// --max-string characters (0 turns a bound off; a smaller bound in the schema is kept): this
// server's policy, not the client's schema. One request is decoded at a time; the others wait.
// Errors answer the OpenAI error shape with a 4xx/5xx status. Started by local_model.sh.
import http from "node:http";
import { getLlama, LlamaChatSession, LlamaLogLevel } from "node-llama-cpp";

function option(name, fallback) {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const modelPath = option("model", null);
if (!modelPath) {
    console.error("usage: node server.mjs --model FILE.gguf [--port 8089]");
    process.exit(2);
}
const host = option("host", "127.0.0.1");
const port = Number(option("port", "8089"));
const threads = Number(option("threads", "2"));
const contextSize = Number(option("context", "4096"));
const defaultMaxTokens = Number(option("max-tokens", "512"));
const maxItems = Number(option("max-items", "4"));
const maxString = Number(option("max-string", "300"));
const modelName = option("name", modelPath.split("/").pop().replace(/\.gguf$/, ""));
if (!["127.0.0.1", "localhost", "::1"].includes(host)) {
    console.error(`--host must be a loopback address, got ${host}`);
    process.exit(2);
}

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ contextSize, threads, sequences: 1 });
const sequence = context.getSequence();

const KEEP = new Set([
    "type", "properties", "required", "items", "prefixItems", "enum", "const",
    "additionalProperties", "minItems", "maxItems", "minLength", "maxLength", "$defs", "$ref",
    "oneOf", "description",
]);

function bounded(limit, given) {
    if (!(limit > 0)) return given;
    return given === undefined ? limit : Math.min(limit, Number(given));
}

// The part of a JSON schema node-llama-cpp's grammar compiler understands.
function grammarSchema(node) {
    if (Array.isArray(node)) return node.map(grammarSchema);
    if (node === null || typeof node !== "object") return node;
    const out = {};
    for (const [key, value] of Object.entries(node)) {
        if (key === "anyOf") out.oneOf = grammarSchema(value);
        else if (key === "properties" || key === "$defs") {
            out[key] = Object.fromEntries(
                Object.entries(value).map(([k, v]) => [k, grammarSchema(v)]));
        } else if (KEEP.has(key)) out[key] = grammarSchema(value);
    }
    if (out.type === "object" && out.properties && !out.required) {
        out.required = Object.keys(out.properties);
    }
    if (out.type === "array") {
        const cap = bounded(maxItems, out.maxItems);
        if (cap !== undefined) out.maxItems = cap;
    }
    if (out.type === "string" && !out.format && out.enum === undefined && out.const === undefined) {
        const cap = bounded(maxString, out.maxLength);
        if (cap !== undefined) out.maxLength = cap;
    }
    return out;
}

async function grammarFor(format) {
    if (!format || format.type === "text") return undefined;
    if (format.type === "json_object") return llama.getGrammarFor("json");
    if (format.type === "json_schema" && format.json_schema && format.json_schema.schema) {
        return llama.createGrammarForJsonSchema(grammarSchema(format.json_schema.schema));
    }
    throw new HttpError(400, `unsupported response_format ${JSON.stringify(format).slice(0, 80)}`);
}

class HttpError extends Error {
    constructor(status, message) { super(message); this.status = status; }
}

function text(content) {
    if (typeof content === "string") return content;
    if (Array.isArray(content)) {
        return content.map((p) => (p && p.type === "text" ? p.text : "")).join("");
    }
    throw new HttpError(400, "message content must be a string or a list of text parts");
}

function history(messages) {
    if (!Array.isArray(messages) || messages.length === 0) {
        throw new HttpError(400, "messages must be a non-empty list");
    }
    const last = messages[messages.length - 1];
    if (!last || last.role !== "user") throw new HttpError(400, "the last message must be the user's");
    const items = messages.slice(0, -1).map((m) => {
        if (m.role === "system" || m.role === "developer") return { type: "system", text: text(m.content) };
        if (m.role === "user") return { type: "user", text: text(m.content) };
        if (m.role === "assistant") return { type: "model", response: [text(m.content ?? "")] };
        throw new HttpError(400, `unsupported message role ${JSON.stringify(m.role)}`);
    });
    return { items, prompt: text(last.content) };
}

let queue = Promise.resolve();
function serialised(work) {
    const run = queue.then(work, work);
    queue = run.catch(() => undefined);
    return run;
}

async function complete(body) {
    const { items, prompt } = history(body.messages);
    const grammar = await grammarFor(body.response_format);
    const maxTokens = Number(body.max_completion_tokens ?? body.max_tokens ?? defaultMaxTokens);
    const temperature = Number(body.temperature ?? 0);
    return serialised(async () => {
        await sequence.clearHistory();
        const before = sequence.tokenMeter.getState();
        const session = new LlamaChatSession({ contextSequence: sequence, autoDisposeSequence: false });
        try {
            session.setChatHistory(items);
            const started = Date.now();
            const meta = await session.promptWithMeta(prompt, {
                grammar, maxTokens, temperature,
                seed: body.seed === undefined ? 0 : Number(body.seed),
            });
            const used = sequence.tokenMeter.getState();
            const promptTokens = used.usedInputTokens - before.usedInputTokens;
            const completionTokens = used.usedOutputTokens - before.usedOutputTokens;
            const ms = Date.now() - started;
            console.log(JSON.stringify({ at: new Date().toISOString(), ms, prompt_tokens: promptTokens,
                completion_tokens: completionTokens, stop: meta.stopReason,
                schema: body.response_format ? body.response_format.type : "text" }));
            return {
                id: `chatcmpl-${Date.now().toString(36)}`,
                object: "chat.completion",
                created: Math.floor(Date.now() / 1000),
                model: modelName,
                choices: [{
                    index: 0,
                    message: { role: "assistant", content: meta.responseText },
                    finish_reason: meta.stopReason === "maxTokens" ? "length" : "stop",
                }],
                usage: {
                    prompt_tokens: promptTokens,
                    completion_tokens: completionTokens,
                    total_tokens: promptTokens + completionTokens,
                },
                timing_ms: ms,
            };
        } finally {
            session.dispose({ disposeSequence: false });
        }
    });
}

function send(res, status, payload) {
    const data = JSON.stringify(payload);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
    res.end(data);
}

const server = http.createServer((req, res) => {
    const url = (req.url || "").split("?")[0].replace(/\/+$/, "");
    if (req.method === "GET" && (url === "/v1/models" || url === "/models")) {
        return send(res, 200, { object: "list", data: [{ id: modelName, object: "model", owned_by: "local" }] });
    }
    if (req.method === "GET" && url === "/health") return send(res, 200, { status: "ok", model: modelName });
    if (req.method !== "POST" || !(url === "/v1/chat/completions" || url === "/chat/completions")) {
        return send(res, 404, { error: { message: `no route ${req.method} ${url}`, type: "not_found" } });
    }
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
        try {
            let body;
            try { body = JSON.parse(Buffer.concat(chunks).toString("utf8")); } catch {
                throw new HttpError(400, "the body is not JSON");
            }
            if (body.stream) throw new HttpError(400, "streaming is not supported");
            send(res, 200, await complete(body));
        } catch (err) {
            const status = err instanceof HttpError ? err.status : 500;
            send(res, status, { error: { message: String(err && err.message || err), type: status < 500 ? "invalid_request_error" : "server_error" } });
        }
    });
});
server.listen(port, host, () => {
    console.log(`serving ${modelName} on http://${host}:${port}/v1 (threads ${threads}, ` +
        `context ${contextSize}, max tokens ${defaultMaxTokens}, arrays <= ${maxItems}, strings <= ${maxString})`);
});
for (const sig of ["SIGINT", "SIGTERM"]) {
    process.on(sig, () => { server.close(); process.exit(0); });
}
