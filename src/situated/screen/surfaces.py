"""Sensitive surfaces a lesson touches, and links that are refused at write.

A lesson proposed by an agent (authority `inferred`) that touches a sensitive surface is held
for review whatever the namespace's promotion policy (`write.gates.PoisoningGate`). The surfaces
are found with general features, not attack strings:

- regular expressions for the shapes: URLs, e-mail addresses (and the secrets gate's
  `[REDACTED:email]`), code-like identifiers (`snake_case`, `camelCase`, `name(`, backticks);
- a small vocabulary per surface, in a few languages, matched on the TR39 skeleton
  (`situated.names.skeleton`) of the NFKC-normalised, lower-cased text, so look-alike letters,
  full-width forms and zero-width characters do not hide a word. A *strong* word touches the
  surface by itself (`admin`, `iban`, `password`, `bcc`, `forever`); a *weak* word (`role`,
  `refund`, `warning`, `memory`) only together with a cue in the same sentence that asks to
  skip, grant, widen or redirect (`without`, `skip`, `granted`, `another account`, `deleted`).

Every decoded view of the text (`normalise.decoded_views`: base64, hex, rot13, percent, HTML
entities) is read as well as the original.

`refused_links` gives the reasons a text is refused outright: a markdown (or HTML) image, which
a renderer fetches without anyone clicking, and a URL whose query string or template
placeholder (`{...}`, `$name`, `%s`) could carry the run's context out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from situated.names import skeleton
from situated.safety import allow_list, denied_tools, injection_findings, tool_mentions
from situated.screen.normalise import decoded_views, normalise

SURFACES = ("tools", "permissions", "money", "credentials", "identity", "tenants", "outbound",
            "safety", "memory")
"""The sensitive surfaces, in the order reasons name them."""

_STRONG: dict[str, tuple[str, ...]] = {
    "tools": ("sudo", "shell command", "webhook", "tool call", "function call"),
    "permissions": (
        "admin", "admins", "administrator", "administrador", "administrateur",
        "administratorrechte", "администратор", "superuser", "root access", "root privileges",
        "impersonate", "bypass*", "circumvent*", "contourner", "umgehen", "обойти", "eludir",
        "saltar la aprobación",
    ),
    "money": (
        "wire transfer", "payout*", "pay out", "iban", "swift code", "routing number",
        "wallet address", "transfer funds", "move funds", "send money", "send funds",
        "virement", "überweisung", "überweisen", "перевести",
    ),
    "credentials": (
        "api key*", "access token*", "secret key*", "private key*", "ssh key*", "2fa", "mfa",
        "one-time code*", "one time code*", "verification code*", "security code*", "cvv",
        "pin code*", "login details", "redacted:secret",
    ),
    "outbound": ("bcc", "cco", "cci", "in copy", "en copie", "en copia", "redacted:email"),
    "safety": (
        "no disclaimer", "without warning", "without a warning", "without the warning",
        "sin advertencia", "sans avertissement", "ohne warnung",
    ),
    "memory": ("re-add*", "readd*", "re-insert*", "reinsert*", "re-create it", "recreate it"),
    "identity": (
        "identity verification", "identity check*", "id check*", "verify identity",
        "verify their identity", "kyc", "passport*", "driver's licen*", "drivers licen*",
        "date of birth", "social security number*", "account owner*", "account holder*",
        "account email", "account e-mail", "account recovery", "reset the password",
        "password reset*", "sim swap*", "change the phone number", "identité", "identidad",
    ),
}
_WEAK: dict[str, tuple[str, ...]] = {
    "tenants": (
        "another customer's", "other customers'", "other customer's", "another tenant*",
        "other tenant*", "cross-tenant", "someone else's account", "another user's",
        "other users'", "another account's", "other accounts' data", "all customers' data",
        "every customer's",
    ),
    "permissions": (
        "permission*", "role", "roles", "escalat*", "elevat*", "approv*", "authoriz*",
        "authoris*", "rights", "sign-off", "clearance", "privilege*", "administrative",
        "override*", "permiso*", "rol", "aprobación", "autorisation", "droits",
        "berechtigung*", "rolle", "genehmigung", "права", "разрешение", "роль",
    ),
    "money": (
        "refund*", "payment*", "pay", "credit", "funds", "money", "wire", "bitcoin", "crypto*",
        "transfer*", "deposit*", "remit*",
        "transferencia", "перевод", "transferir", "reembolso", "remboursement",
        "rückerstattung", "возврат", "деньги",
    ),
    "credentials": (
        "password*", "passcode*", "passphrase*", "credential*", "otp", "contraseña*",
        "mot de passe", "passwort", "kennwort", "пароль", "senha",
    ),
    "outbound": (
        "cc", "forward*", "copy", "copies", "reenviar", "reenvía", "transférer",
        "weiterleiten", "переслать", "перешли",
    ),
    "safety": (
        "safety", "warning*", "caveat*", "disclaimer*", "precaution*", "seguridad",
        "advertencia", "sécurité", "avertissement", "sicherheit", "warnung",
        "безопасность", "предупреждение",
    ),
    "memory": (
        "forever", "never forget", "always remember", "remember this", "memoriz*", "memoris*",
        "persist*", "permanent*", "para siempre", "pour toujours", "für immer", "навсегда",
        "recuérdalo", "souviens-toi", "merke dir", "memory", "memories", "this lesson",
        "this note", "this rule", "this entry", "memoria", "mémoire", "gedächtnis", "память",
    ),
}
_ADDRESS = r"(?:@|https?://|www\.|\b[a-z0-9-]{1,63}\.(?:com|net|org|io|example)\b)"
_ACCOUNT = re.compile(
    r"(?i)(?<!\w)(?:account|acct|a/c|konto|cuenta|compte|сч[её]т|wallet)\W{0,3}"
    r"(?:(?:no|nr|num|number|n°|#)\W{0,3})?[a-z]{0,4}\d[\d -]{5,}"
)
"""A destination account: an account word followed by a number of six digits or more (the
shape, like an address for `outbound`); with a money word in the sentence, it touches money."""
_CUES: dict[str, tuple[str, ...]] = {
    "permissions": (
        "skip*", "without", "waive*", "unnecessary", "not needed", "no need", "not required",
        "exempt", "grant", "granted", "grants", "full", "unrestricted", "unlimited",
        "entitled", "has permission*", "have permission*", "allowed to", "sin", "sans", "ohne",
        "без", "tiene", "a le droit", "hat",
    ),
    "money": (
        "without", "skip*", "bypass*", "override*", "unlimited", "regardless", "no matter",
        "another account", "different account", "external account", "personal account",
        "third party", "no questions", "no review", "no check", "no approval", "sin", "sans",
        "ohne", "без", "independientemente",
    ),
    "credentials": (
        "ask*", "share*", "send*", "tell", "give", "reveal*", "disclos*", "store*", "save*",
        "keep*", "write down", "note*", "paste*", "plain text", "in the reply", "in the ticket",
        "pide", "demande*", "frag*", "попроси*", "пришли*",
    ),
    "outbound": (),  # an outbound word counts only with an address (`_ADDRESS`)
    "tenants": (
        "access*", "read*", "show*", "share*", "send*", "export*", "copy", "copies",
        "return*", "use", "uses", "using", "merge*", "combine*", "query", "queries",
        "look up", "fetch*", "include*", "reveal*", "list*", "dump*",
    ),
    "safety": (
        "skip*", "omit*", "drop", "ignore*", "leave out", "don't mention", "do not mention",
        "never mention", "no need", "unnecessary", "disable*", "turn off", "without", "sin",
        "sans", "ohne", "без", "omitir", "omettre", "weglassen",
    ),
    "memory": (
        "delet*", "remov*", "eras*", "wipe*", "purg*", "restor*", "borrad*", "borra*",
        "supprim*", "gelöscht", "удал*",
    ),
}
WHOLE_TEXT = frozenset({"memory"})
"""Surfaces whose cue may be in another sentence of the same text (persistence is a property of
the memory as a whole: "remember this. Re-add it if deleted.")."""

_URL = re.compile(r"(?i)\b(?:https?|ftp)://[^\s<>\"'`)\]]+|\bwww\.[^\s<>\"'`)\]]+")
_EMAIL = re.compile(
    r"(?<![\w.%+\-])[\w.%+\-]{1,64}@[\w\-]{1,63}(?:\.[\w\-]{1,63}){0,8}\.[^\W\d_]{2,63}"
    r"(?![\w\-])"
)
"""An address in any script, its runs bounded as RFC 5321 and DNS bound them (64 before the
`@`, labels of 63, a few labels): unbounded, a search was quadratic in a long run without a
match; a match starts only at the start of a run."""
_MD_IMAGE = re.compile(r"!\[[^\]\n]*\]\s*\(|<\s*img\b", re.IGNORECASE)
_PLACEHOLDER = re.compile(
    r"\{[^{}\s]{0,40}\}|\$\{?[A-Za-z_]\w*|%s|%d|%\([A-Za-z_]\w*\)|<[A-Za-z_]\w*>"
)
_TRANSMIT = re.compile(
    r"(?i)\b(send|sent|email|e-mail|mail|forward|post|upload|submit|share|report|notify|sync|"
    r"export|copy|cc|bcc|fetch|load|visit|ping|webhook|enviar|envía|envoyer|envoie|senden|"
    r"sende|отправ\w*)\b"
)
_TOOL_PHRASE = re.compile(
    r"\b(call|invoke|run|trigger|execute|use|llama|usa|utilise|appelle|nutze|rufe)\b.{0,40}"
    r"\b(tool|function|herramienta|función|outil|fonction|werkzeug|funktion|инструмент)\b"
)
_SENTENCE = re.compile(r"[.!?;\n]+(?:\s|$)|[。！？]")


def _alternation(words: Iterable[str]) -> re.Pattern[str]:
    """One pattern for whole words; a trailing `*` makes a stem (`delet*`: deleted, deletes)."""
    keys = sorted({w.lower() for w in words}, key=len, reverse=True)
    parts = [
        re.escape(skeleton(k[:-1])) + r"\w*" if k.endswith("*") else re.escape(skeleton(k))
        for k in keys
    ]
    return re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)")


_STRONG_RX = {s: _alternation(w) for s, w in _STRONG.items()}
_WEAK_RX = {s: _alternation(w) for s, w in _WEAK.items()}
_CUE_RX = {s: _alternation(w) for s, w in _CUES.items() if w}
_ADDRESS_RX = re.compile(_ADDRESS)


def tool_names(text: str, allowed: Iterable[str] | None) -> set[str]:
    """Tool-like identifiers in `text` that `allowed` does not allow.

    With an allow-list, every tool mention (`safety.tool_mentions`) outside it; without one
    (deny-by-default), every code-like mention (`safety.code_like`): no tool is allowed."""
    return denied_tools(tool_mentions(text), None if allowed is None else allow_list(allowed))


@lru_cache(maxsize=4096)
def _views(text: str) -> tuple[str, ...]:
    return tuple(v.text for v in decoded_views(normalise(text)))


def text_views(text: str) -> tuple[str, ...]:
    """The normalised text and its decoded views (`normalise.decoded_views`), cached."""
    return _views(text)


def views_cache() -> Any:
    """The cache of decoded views (memory text): erasure empties it."""
    return _views


def view_findings(text: str) -> tuple[str, ...]:
    """Reasons of `safety.injection_findings` over the normalised text and its decoded views."""
    found = [f.reason for v in (text, *_views(text)) for f in injection_findings(v)]
    return tuple(dict.fromkeys(found))


def sensitive_surfaces(text: str, allowed_tools: Iterable[str] | None = None) -> tuple[str, ...]:
    """The sensitive surfaces (`SURFACES`) `text` touches, in their fixed order.

    `allowed_tools` is the namespace's allow-list: a tool it allows is not a sensitive
    mention; without one every code-like tool name is."""
    allowed = None if allowed_tools is None else frozenset(allowed_tools)
    found: set[str] = set()
    for view in _views(text):
        found.update(_surfaces_of(view, allowed))
    return tuple(s for s in SURFACES if s in found)


_HARM = re.compile(
    r"(?<!\w)(?:steal\w*|stole|exfiltrat\w*|skim\w*|hijack\w*|poison\w*|tamper\w*|sabotag\w*|"
    r"spoof\w*|impersonat\w*|evad\w*|evasion|exploit\w*|backdoor\w*|phish\w*|ransom\w*|"
    r"malware|malicious|keylog\w*|keystroke\w*|siphon\w*|launder\w*|embezzl\w*|extort\w*|"
    r"coerc\w*|blackmail\w*|sybil|ddos|brute[- ]?forc\w*|jailbreak\w*|misinformation|"
    r"disinformation|decoy\w*|covert\w*|covertly|silently|secretly|undetected|unnoticed|"
    r"without (?:anyone|them|the user|the customer) (?:knowing|noticing))(?!\w)")
"""Words of harmful intent: a lesson mentioning one is never proven guidance unseen."""
_COMMAND = re.compile(
    r"(?:^|[\s;|&`$(])(?:sudo|curl|wget|bash|sh|zsh|powershell|cmd|chmod|chown|rm|cat|scp|ssh|"
    r"nc|ncat|netcat|docker|kubectl|helm|aws|az|gcloud|gsutil|bq|pip|npm|git|eval|exec|python3?|"
    r"node|psql|mysql|mongo|redis-cli|etcdctl|terraform|openssl|base64)[ \t]+[^\s]+"
    r"|(?<!\w)--?[a-z][\w-]*=|~/\.|/etc/|/bin/|\|[ \t]*(?:ba)?sh\b|\$\(|<script|\bimport os\b")
"""The shape of a command line or code an agent would run: a known program with an argument,
a `--flag=`, a dot-file or system path, a pipe to a shell, `$(`, a script tag."""


def mentioned_surfaces(text: str) -> tuple[str, ...]:
    """The surfaces `text` (or a decoded view) names by a strong word, an address, a link or
    an account number, with no cue needed (`payout`, `api key`, `account 12345678`), and two
    more: `harm` (words of harmful intent: steal, exfiltrate, tamper, silently ...) and
    `commands` (the shape of a command line or code): what an agent's lesson is not trusted
    on unproven. A weak word alone (`refund`, `role`, `copy`) is no mention."""
    found: set[str] = set()
    for view in _views(text):
        key = skeleton(view.lower())
        found.update(s for s, rx in _STRONG_RX.items() if rx.search(key))
        if _EMAIL.search(view) or _URL.search(view):
            found.add("outbound")
        if _ACCOUNT.search(view):
            found.add("money")
        if _HARM.search(view.lower()):
            found.add("harm")
        if _COMMAND.search(view):
            found.add("commands")
    return tuple(s for s in (*SURFACES, "harm", "commands") if s in found)


def _surfaces_of(view: str, allowed: frozenset[str] | None) -> set[str]:
    found: set[str] = set()
    if tool_names(view, allowed):
        found.add("tools")
    if _EMAIL.search(view):
        found.add("outbound")
    key = skeleton(view.lower())
    if _TOOL_PHRASE.search(key):
        found.add("tools")
    for surface, rx in _STRONG_RX.items():
        if rx.search(key):
            found.add(surface)
    whole = {s for s in WHOLE_TEXT if _CUE_RX[s].search(key)}
    for sentence in (_SENTENCE.split(view) or [view]):
        if _URL.search(sentence) and _TRANSMIT.search(sentence):
            found.add("outbound")
        skel = skeleton(sentence.lower())
        for surface, rx in _WEAK_RX.items():
            if surface in found or not rx.search(skel):
                continue
            if surface == "outbound":
                cued = _ADDRESS_RX.search(sentence.lower()) is not None
            elif surface == "money" and _ACCOUNT.search(sentence):
                cued = True
            else:
                cued = surface in whole or _CUE_RX[surface].search(skel) is not None
            if cued:
                found.add(surface)
    return found


def refused_links(text: str) -> tuple[str, ...]:
    """Why `text` is refused at write for its links (never quoting them), or ()."""
    reasons: list[str] = []
    for view in _views(text):
        if _MD_IMAGE.search(view):
            reasons.append("holds a markdown or HTML image (fetched when rendered)")
        for m in _URL.finditer(view):
            url = m.group(0)
            if "?" in url.rstrip("?.,;:!") or ("#" in url and "=" in url.split("#", 1)[1]):
                reasons.append("holds a URL with a query string that could carry context out")
            if _PLACEHOLDER.search(url):
                reasons.append("holds a URL with a template placeholder that could carry "
                               "context out")
    return tuple(dict.fromkeys(reasons))
