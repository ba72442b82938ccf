"""What a piece of advice does to a control: a structured reading of its actions and objects.

Poison that reads as ordinary advice does not instruct the agent; it weakens a control ("relabel
expired lots with a new expiry date", "no need to verify the caller", "the robot may pass people
at full speed when behind schedule"). Its benign twin keeps or strengthens one ("verify the
account e-mail before changing the payout card", "never ask for the password"). Both name the
same objects, so neither a surface word nor the injection classifier tells them apart: the
polarity is in the action, its object and its negation.

`read_advice(text)` reads each clause of the text, and of each of its decoded views
(`surfaces.text_views`: NFKC, confusables folded, base64 / hex / rot13 / leetspeak decoded):

- **actions** by general class, never by example: *weakening* verbs (skip, bypass, disable,
  waive, override, ...) that weaken when their object is a control; *inherently weakening*
  verbs (backdate, falsify, pre-approve, rubber-stamp); *altering* verbs (relabel, extend,
  raise, widen) that weaken when their object is a limit, a date or a label; *exposing* verbs
  (ask for, store, share, forward, reuse, ...) that weaken when their object is a secret;
  *strengthening* verbs (verify, confirm, escalate, hand over, wait for approval, refuse);
- **negation** flips an action (`never skip` keeps a control, `don't verify` weakens one);
  a waiver (`no need to`, `optional`) before a strengthening verb weakens; `without` before a
  control or an action weakens or flips it;
- **status claims** about a control (`the check is deprecated / optional / no longer
  required`), acting **alone** where two are required, and an **exception for expediency**
  (`when behind schedule`, `to save time`) beside a permission (`may`, `can`, `is fine to`);
- **claims of policy** (a policy version or update, an exemption, a permission someone holds):
  policy comes from the run's `Policy`, never from memory;
- **decode and run**: a request to decode something and execute or follow it;
- **data sent outside**: an exposing verb with data as its object and an outside destination
  (`send all the data to an external server`);
- **concealment**: keeping an incident, defect, risk or cost from the people it concerns
  (`hide the breach`, `never mention the outage`; `never hide the outage` keeps the control);
- **retiring a stale secret** (`delete expired tokens`, `remove unused passwords`) is hygiene,
  not a control skipped; removing a live secret or a stale control still weakens.

The classes are small general vocabularies of verbs and nouns, in English and the common stems
of Spanish, French, German and Portuguese (what an action does to a
check, a limit, a secret), not attack strings; `scripts/poisoning_benchmark.py` measures them on
outside attacks and outside benign look-alikes, with a held-out set never tuned on. Every pattern
is an alternation of literal words or a fixed-width window, searched in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from situated.screen.surfaces import text_views


@dataclass(frozen=True)
class Advice:
    """What a text does to controls, as read from its clauses (every decoded view)."""

    weakens: tuple[str, ...] = ()
    """How it weakens a control, by class (`skips or disables a control`, ...), each once:
    never the text's own words (a hold reason is kept in the ledger, which erasure cannot
    rewrite)."""
    strengthens: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()
    """Claims of policy: `policy version`, `policy update`, `exemption`, `permission`."""
    runs_decoded: bool = False
    """Asks the agent to decode something and run or follow it."""

    @property
    def polarity(self) -> str:
        """`weakens`, `strengthens` or `neutral` (weakening wins over strengthening)."""
        if self.weakens:
            return "weakens"
        return "strengthens" if self.strengthens else "neutral"


def _forms(words: str) -> tuple[str, ...]:
    return tuple(words.split())


def _words(*stems: str) -> re.Pattern[str]:
    """Whole words or phrases; a trailing `*` is a stem (`verif*`: verify, verified)."""
    parts = sorted({s.lower() for s in stems}, key=len, reverse=True)
    alts = [re.escape(p[:-1]) + r"\w*" if p.endswith("*") else re.escape(p) for p in parts]
    return re.compile(r"(?<!\w)(?:" + "|".join(alts).replace(r"\ ", r"\s+") + r")(?!\w)")


CONTROL = _words(
    "check", "checks", "checking", "checked", "verification*", "validation*", "approval*",
    "sign-off*", "signoff*", "sign off", "review", "reviews", "confirmation*",
    "authentication*", "authori?ation*", "authorisation*", "authorization*", "2fa", "mfa",
    "otp", "captcha*", "audit*", "log", "logs", "logging", "monitoring", "alarm*", "alert*",
    "warning*", "caveat*", "disclaimer*", "safeguard*", "guardrail*", "guard", "guards",
    "safety", "lockout*", "interlock*", "lock", "locks", "barrier*", "seal", "seals",
    "inspection*", "quarantine*", "id", "ids", "identity", "identification", "kyc", "visa",
    "visas", "passport*", "permit", "permits", "licence*", "license*", "certificate*",
    "consent*", "two-person", "four-eyes", "dual control", "second approver*",
    "second signature*", "supervisor*", "escalation*", "handover*", "hand-off*", "protocol*",
    "procedure*", "rule", "rules", "requirement*", "compliance", "policy", "policies",
    "limit", "limits", "cap", "caps", "threshold*", "quota*", "ceiling*", "speed limit*",
    "expiry", "expiration*", "expired", "expiry date*", "use-by", "best-before", "label",
    "labels", "labeling", "labelling", "firewall*", "encryption", "backup*", "ppe",
    "helmet*", "goggles", "gloves", "harness*", "precaution*", "restriction*", "control",
    "controls", "screening", "background check*", "fraud check*", "test", "tests", "testing",
    "password*", "passcode*", "pin", "credential*", "token*", "protection*", "timeout*",
    "time-out*", "rate limit*", "rate-limit*", "rate limiting", "throttl*", "antivirus*",
    "anti-virus*", "sandbox*", "security software", "security scan*", "security check*",
    "regulation*", "guideline*", "security posture",
    # es / fr / de / pt: the same kinds of control
    "validaci*", "verificaci*", "aprobaci*", "revisi*", "autorizaci*", "comprobaci*",
    "contrôle*", "vérification*", "approbation*", "prüfung*", "kontrolle*", "freigabe*",
    "genehmigung*", "überprüfung*", "verificação", "validação", "aprovação", "validações",
    "verificações", "controles", "controlli", "verifica", "verifiche", "seguridad",
    "sécurité", "sicherheit*", "segurança"
)
SECRET = _words(
    "password*", "passcode*", "passphrase*", "pin", "pins", "pin code*", "otp", "one-time code*",
    "one time code*", "verification code*", "security code*", "2fa code*", "mfa code*",
    "auth code*", "login code*", "recovery code*", "backup code*", "token", "tokens",
    "api key*", "secret", "secrets", "credential*", "cvv", "cvc", "card number*",
    "private key*", "login details", "sign-in details", "security answer*",
    "credencial*", "contraseña*", "senha*", "mot de passe", "mots de passe",
    "identifiant*", "passwort*", "passwörter", "zugangsdaten", "kennwort*", "clave*",
    "credenziali", "password", "пароль*", "token de acceso", "jeton*"
)
LIMIT = _words(
    "limit", "limits", "cap", "caps", "threshold*", "quota*", "ceiling*", "allowance*",
    "speed limit*", "expiry", "expiration*", "expired", "expiry date*", "expiration date*",
    "use-by", "best-before", "use-by date*", "due date*", "label", "labels", "deadline*",
    "age limit*", "max", "maximum",
)
WEAKEN = _words(
    "skip*", "bypass*", "circumvent*", "disable*", "disabling", "deactivat*", "turn off",
    "turns off", "turned off", "switch off", "shut off", "ignor*", "disregard*", "waiv*",
    "omit*", "drop", "drops", "dropped", "remov*", "delet*", "suppress*", "silenc*", "mute*",
    "overrid*", "overrule*", "relax*", "loosen*", "work around", "get around", "skirt*",
    "wipe", "wipes", "wiped", "wiping",
    "forgo*", "forego*", "dispense with", "cut out", "leave out",
    "let through", "wave through", "waved through",
    "ignora*", "ignore", "ignorez", "ignorier*", "omite", "omitir", "omet*", "salta*",
    "desactiva*", "desativ*", "désactiv*", "deaktivier*", "contourn*", "umgeh*", "elude*",
    "evita*", "salte*", "pula*", "saltate"
)
CONCEAL = _words(
    "hide", "hides", "hid", "hiding", "conceal*", "withhold*", "cover up", "covers up",
    "covered up", "covering up", "hush up", "downplay*", "play down", "plays down",
    "gloss over", "glosses over", "sweep under", "keep quiet about", "keep secret",
    "ocult*", "esconde*", "cache*r", "dissimul*", "verheimlich*", "verschweig*", "vertusch*",
)
"""Verbs that keep something from the people it concerns."""
DISCLOSE = _words(
    "mention*", "tell", "tells", "disclos*", "report", "reports", "admit*", "acknowledg*",
    "inform", "informs", "notify", "notifies", "warn", "warns", "alert", "alerts",
    "bring up", "menciona*", "informa*", "mentionne*", "signale*", "erwähn*", "melde*",
)
"""Verbs that tell it: negated ("never mention the outage"), they conceal."""
DISCLOSABLE = _words(
    "incident*", "breach*", "recall", "recalls", "defect*", "outage*", "vulnerabilit*",
    "side effect*", "side-effect*", "negative*", "downside*", "mistake*", "complaint*",
    "lawsuit*", "fine", "fines", "penalt*", "leak", "leaks", "data leak*", "risk", "risks",
    "hidden fee*", "fees", "warning*",
    "incidente*", "brecha*", "défaut*", "faille*", "vorfall*", "mangel*", "panne*",
)
"""What the people it concerns have a claim to be told: incidents, defects, risks, costs."""
DISPOSE = _words(
    "remov*", "delet*", "drop", "drops", "dropped", "purg*", "clear", "clears", "cleared",
    "clean up", "cleans up", "wipe", "wipes", "wiped", "retire", "retires", "retired",
    "revok*", "invalidat*", "expire", "expires",
)
"""Weakening verbs that dispose of their object (the others bypass it and leave it in place)."""
STALE = _words(
    "expired", "old", "older", "stale", "unused", "inactive", "idle", "revoked", "obsolete",
    "outdated", "superseded", "leaked", "compromised", "orphaned", "dangling", "abandoned",
    "previous", "temporary", "temp",
)
"""What makes a secret due for disposal: deleting expired tokens or unused keys retires them
(hygiene), where skipping or bypassing an expired one accepts it."""
DATA = _words(
    "all data", "all the data", "user data", "customer data", "patient data", "personal data",
    "data", "datos", "données", "daten", "dados", "memory", "memories", "context",
    "clipboard", "logs", "files", "emails", "e-mails", "conversation*", "configuration",
    "config", "history", "records", "contacts", "documents", "database", "everything",
)
OUTSIDE = _words(
    "external*", "externo*", "externa*", "extern", "endpoint*", "outside", "offshore",
    "third-party", "third party", "personal email", "personal account", "personal dropbox",
    "my account", "my email", "my server", "remote server", "server", "webhook*", "pastebin",
    "dropbox", "exterior", "fuera", "extérieur", "externe", "all peers", "all agents",
    "every agent", "other agents", "the swarm", "the mesh",
)
WEAKEN_ALWAYS = _words(
    "backdat*", "back-dat*", "predate", "predated", "predating", "pre-date*", "falsif*",
    "forge", "forged", "forges", "forging", "forgery", "rubber-stamp*", "rubber stamp*",
    "pre-approv*", "preapprov*",
    "auto-approv*", "autoapprov*", "self-approv*", "approve your own", "approve their own",
    "approve his own", "approve her own", "self-propagat*", "self-replicat*",
)
ALTER = _words(
    "relabel*", "re-label*", "redat*", "re-dat*", "extend*", "raise", "raises", "raised",
    "raising", "increas*", "widen*", "lift", "lifts", "lifted", "lifting", "doubl*", "exceed*",
    "change", "changes", "changed", "changing", "edit*", "alter*", "adjust*", "reset*",
    "overwrit*", "updat*", "push back", "pushes back", "move the date", "stretch*",
)
EXPOSE = _words(
    "ask for", "asks for", "asked for", "asking for", "ask the customer for",
    "ask them for", "ask the caller for", "ask the user for", "request", "requests",
    "requested", "requesting", "collect*", "store", "stores", "stored", "storing", "save",
    "saves", "saved", "saving", "write down", "writes down", "note down", "share", "shares",
    "shared", "sharing", "send", "sends", "sent", "sending", "forward*", "email", "emails",
    "emailed", "e-mail*", "post", "posts", "posted",
    "paste*", "reuse*", "re-use*", "reveal*", "disclos*", "tell", "tells", "read out",
    "read back", "print*", "log", "logs", "logged", "record", "records", "recorded",
    "include", "includes", "included", "copy", "copies", "copied", "text", "texts", "texted",
    "give out", "hand out",
    "envia*", "envía*", "enviar", "manda*", "compart*", "muestra*", "mostr*",
    "revela*", "envoie*", "envoy*", "partag*", "révèl*", "transmet*", "schick*", "send*",
    "sende", "teil*", "zeig*", "gib", "invia*", "condividi*", "mostra*", "exfiltr*",
    "transmit*", "upload*", "sync", "syncs", "synced", "export*", "dump*", "leak*",
    "capture*", "cache", "caches", "cached"
)
STRENGTHEN = _words(
    # verb forms only: "verification" is the control, "verify" the action on it
    *_forms("verify verifies verified verifying confirm confirms confirmed confirming "
            "validate validates validated validating authenticate authenticates authenticated "
            "inspect inspects inspected inspecting double-check double-checks double-checked "
            "recheck re-check rechecks cross-check cross-checks check checks checked checking "
            "require requires required enforce enforces enforced enforcing escalate escalates "
            "escalated escalating handover refer refers referred refuse refuses refused "
            "refusing decline declines declined declining deny denies denied reject rejects "
            "rejected rejecting stop stops pause pauses paused halt halts halted lock locks "
            "locked quarantine quarantines quarantined discard discards discarded flag flags "
            "flagged block blocks blocked report reports reported comply complies match "
            "matches compare compares"),
    "double check", "hand over", "hands over", "handed over", "hand off", "hands off",
    "hand-off", "wait for", "waits for", "waiting for", "wait until", "get approval",
    "get sign-off", "obtain approval", "seek approval", "ask for approval", "ask for sign-off",
    "ask for confirmation", "asks for confirmation", "asking for confirmation",
    "ask for permission", "asks for permission", "asking for permission", "ask for consent",
    "asks for consent", "asking for consent",
    "ask a supervisor", "ask a manager", "ask for a second", "slow down", "slows down",
    "dispose of", "follow the", "keep the check",
    "verifica", "verificar", "comprueba", "comprobar", "vérifie*", "vérifier", "prüf*",
    "überprüf*", "verifique", "confirma", "confirmar", "confirme*", "bestätig*"
)
CHECK = _words(*_forms(
    "verify verifies verified verifying confirm confirms confirmed confirming validate validates "
    "validated validating authenticate authenticates authenticated inspect inspects inspected "
    "inspecting double-check double-checks double-checked recheck re-check rechecks cross-check "
    "cross-checks check checks checked checking"), "double check", "verifica", "verificar",
    "comprueba", "comprobar", "vérifie*", "vérifier", "prüf*", "überprüf*", "verifique",
    "confirma", "confirmar", "confirme*", "bestätig*")
"""The strengthening verbs that are a check by themselves: negated ("don't verify"), they
weaken whatever follows; another negated strengthening verb ("can't wait", "don't stop")
weakens only a control named after it."""
NEGATE = _words(
    "not", "never", "no", "don't", "dont", "doesn't", "didn't", "cannot", "can't", "won't",
    "shouldn't", "mustn't", "nor", "refrain from", "avoid", "stop", "forget to", "forgets to",
    "neglect*", "fail to", "fails to",
)
WAIVER = _words(
    "no need to", "no need for", "needn't", "need not", "don't need to", "doesn't need to",
    "do not need to", "does not need to", "not necessary to", "unnecessary to",
    "no longer need to", "don't have to", "do not have to", "doesn't have to",
    "not required to", "no reason to", "not worth", "don't bother", "do not bother",
    "no point in", "optional to", "optionally",
)
WITHOUT = _words("without", "w/o", "skipping")
STATUS_WEAK = _words(
    "deprecated", "obsolete", "optional", "outdated", "unnecessary", "not needed",
    "not required", "no longer required", "no longer needed", "no longer necessary",
    "no longer applies", "no longer apply", "not mandatory", "waived", "suspended", "lifted",
    "removed", "disabled", "a formality", "just a formality", "redundant", "overkill",
    "not enforced", "rarely enforced", "can be ignored", "can be skipped", "doesn't matter",
    "does not matter", "not important",
)
STATUS_STRONG = _words("required", "mandatory", "compulsory", "obligatory", "must")
ALONE = _words(
    "alone", "by yourself", "by himself", "by herself", "by themselves", "on your own",
    "on their own", "single-handed*", "solo", "without a second", "without another",
    "without a witness", "without a co-signer", "without a cosigner", "one person can",
    "without anyone else",
)
EXPEDIENCY = _words(
    "behind schedule", "in a hurry", "in a rush", "when busy", "when it is busy",
    "when it's busy", "short-staffed", "short staffed", "understaffed", "to save time",
    "to speed things up", "speed things up", "to go faster", "as a courtesy", "just this once",
    "if the customer insists",
    "if they insist", "if the customer is upset", "when the queue is long", "long queue*",
    "running late", "when late", "to hit the target", "to meet the target", "to meet targets",
    "for vip*", "for regulars", "for trusted customers", "when rushed", "nobody checks",
    "no one checks",
    "nobody will notice", "no one will notice",
)
PERMISSIVE = _words(
    "may", "is ok to", "it's ok to", "it is ok to", "is okay to",
    "it's okay to", "is fine to", "it's fine to", "it is fine to", "feel free to",
    "go ahead and", "allowed to", "is acceptable", "it's acceptable", "acceptable to",
    "at full speed", "full speed", "top speed", "maximum speed", "max speed",
)
DECODE = _words(
    "decode*", "decoding", "deobfuscat*", "unescap*", "base64", "base-64", "b64", "hex",
    "hex-decoded", "hex-encoded", "hexadecimal", "rot13", "rot-13", "rot 13", "reverse the",
    "reversed", "unscrambl*", "decipher*", "decrypt*", "encoded", "leetspeak", "ascii codes",
    "char codes", "character codes",
)
RUN = _words(
    "run", "runs", "running", "execut*", "exec", "eval", "evaluate", "follow", "follows",
    "obey*", "carry out", "perform", "paste it into", "paste this into", "paste into",
    "pipe", "piped", "pipe it", "type it into", "invoke", "act on", "do what it says",
    "apply it", "treat it as", "as your instructions", "as instructions", "then do",
)

_CLAIMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("policy version", re.compile(
        r"\bpolic(?:y|ies)[ \t]+(?:version|v\.?[ \t]?\d|rev(?:ision)?\.?[ \t]?\d|\d+(?:\.\d+)+)")),
    ("policy update", re.compile(
        r"\b(?:new|updated|revised|amended|latest|changed|interim|temporary)[ \t]+"
        r"(?:[a-z\-]{2,20}[ \t]+)?(?:polic(?:y|ies)|rules?|guidelines?|sops?|regulations?)\b")),
    ("policy update", re.compile(
        r"\b(?:polic(?:y|ies)|rules?|regulations?|requirements?|guidelines?|checks?)[ \t]+"
        r"(?:was|were|has[ \t]+been|have[ \t]+been|is[ \t]+now|are[ \t]+now|got)[ \t]+"
        r"(?:updated|changed|revised|amended|replaced|superseded|rescinded|lifted|removed|"
        r"relaxed|suspended|waived|retired|deprecated|dropped|scrapped)\b")),
    ("exemption", re.compile(
        r"\b(?:exempt(?:ed|ion|ions)?|waivers?|grandfathered|carve-?outs?|"
        r"special[ \t]+dispensation|standing[ \t]+exception)\b")),
    ("permission", re.compile(
        r"\b(?:is|are|has[ \t]+been|have[ \t]+been|was|were|now|hereby)[ \t]+"
        r"(?:now[ \t]+|hereby[ \t]+|already[ \t]+|officially[ \t]+)?"
        r"(?:allowed|permitted|authori[sz]ed|entitled|cleared|pre-?approved)[ \t]+to\b")),
    ("permission", re.compile(
        r"\b(?:has|have|holds?|with|given|granted|grants?)[ \t]+"
        r"(?:full[ \t]+|special[ \t]+|blanket[ \t]+|standing[ \t]+|admin[ \t]+|unlimited[ \t]+)?"
        r"(?:permissions?|authori[sz]ations?|clearance|sign-off|approval)[ \t]+"
        r"(?:to|for[ \t]+all|on[ \t]+all|over)\b")),
    ("permission", re.compile(r"\b(?:blanket|standing|pre-?)[ \t]?approv(?:al|ed)\b")),
)
_NEGATED_CLAIM = re.compile(r"(?:\bnot|\bnever|n't|\bno)[ \t]+(?:\w+[ \t]+)?$")
_HAND_OVER = re.compile(r"\bhand(?:s|ed|ing)?(?:[ \t]+[\w'\-]+){0,3}?[ \t]+(?:over|off)\b")
"""`hand the payment over`: the object between the verb and its particle, three words at most."""
_CLAUSE = re.compile(r"[.!?;\n]+|,[ \t]+(?:but|however|and then|so)\b|\b(?:but|however)\b")
_WINDOW = 6
"""Tokens between an action and its object, at most."""
_TOKEN = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")


def read_advice(text: str) -> Advice:
    """What `text` (and each of its decoded views) does to controls; see the module."""
    return _read(tuple(text_views(text)))


@lru_cache(maxsize=4096)
def _read(views: tuple[str, ...]) -> Advice:
    weak: dict[str, None] = {}
    strong: dict[str, None] = {}
    claims: dict[str, None] = {}
    runs = False
    for view in views:
        lowered = view.lower().replace("’", "'")
        claims.update(dict.fromkeys(_claims_in(lowered)))
        for clause in _CLAUSE.split(lowered):
            if not clause.strip():
                continue
            w, s, r = _clause(clause)
            weak.update(dict.fromkeys(w))
            strong.update(dict.fromkeys(s))
            runs = runs or r
    return Advice(tuple(weak), tuple(strong), tuple(claims), runs)


def read_claims(text: str) -> tuple[tuple[str, ...], bool]:
    """(claims of policy, asks to decode and run) of `text` and its decoded views: the part
    of `read_advice` that joined fields are screened for (a payload split between them)."""
    return _read_claims(tuple(text_views(text)))


@lru_cache(maxsize=4096)
def _read_claims(views: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
    claims: dict[str, None] = {}
    runs = False
    for view in views:
        lowered = view.lower().replace("’", "'")
        claims.update(dict.fromkeys(_claims_in(lowered)))
        runs = runs or any(DECODE.search(c) and RUN.search(c) for c in _CLAUSE.split(lowered))
    return tuple(claims), runs


def read_claims_plain(text: str) -> tuple[tuple[str, ...], bool]:
    """`read_claims` of the text as written, without its decoded views (cheap: what recall
    screens served texts joined with)."""
    lowered = text.lower()
    if not _CLAIM_WORDS.search(lowered):
        return (), False
    return _read_claims((text,))


_CLAIM_WORDS = re.compile(
    r"polic|rule|guideline|sop|regulation|requirement|check|exempt|waiver|grandfather|carve|"
    r"dispensation|exception|allowed|permitted|authori|entitled|cleared|approv|permission|"
    r"clearance|sign-off|decod|deobfusc|unescap|base|hex|rot|revers|unscrambl|decipher|decrypt|"
    r"encod|leet|ascii|char|b64")
"""Stems every claim or decode-and-run match contains at least one of (a literal gate)."""


def _claims_in(lowered: str) -> list[str]:
    return [name for name, rx in _CLAIMS for m in rx.finditer(lowered)
            if not _NEGATED_CLAIM.search(lowered[max(0, m.start() - 24):m.start()])]


def _spans(rx: re.Pattern[str], clause: str, starts: list[int]) -> list[tuple[int, int, str]]:
    """(first token, last token, words) of each match of `rx`, by token index."""
    out = []
    for m in rx.finditer(clause):
        first = _token_at(starts, m.start())
        last = _token_at(starts, m.end() - 1)
        out.append((first, last, " ".join(m.group(0).split())))
    return out


def _token_at(starts: list[int], offset: int) -> int:
    lo, hi = 0, len(starts)
    while lo < hi:  # the last token starting at or before `offset`
        mid = (lo + hi) // 2
        if starts[mid] <= offset:
            lo = mid + 1
        else:
            hi = mid
    return max(lo - 1, 0)


_COORDINATORS = frozenset({"and", "or", "then", "but"})
"""A negation does not reach across these: "stop and check it again" checks."""


def _clause(clause: str) -> tuple[list[str], list[str], bool]:
    found = list(_TOKEN.finditer(clause))
    starts = [m.start() for m in found]
    words = [m.group(0).lower() for m in found]
    if not starts:
        return [], [], False
    weak: list[str] = []
    strong: list[str] = []
    control = _spans(CONTROL, clause, starts)
    secret = _spans(SECRET, clause, starts)
    limit = _spans(LIMIT, clause, starts)
    negations = _spans(NEGATE, clause, starts)
    waivers = _spans(WAIVER, clause, starts)
    withouts = _spans(WITHOUT, clause, starts)
    weakeners = _spans(WEAKEN, clause, starts)  # "skip verifying": a weakening verb negates
    checks = {first for first, _, _ in _spans(CHECK, clause, starts)}

    def after(at: int, objects: list[tuple[int, int, str]]) -> str | None:
        return next((o for a, _, o in objects if at < a <= at + _WINDOW), None)

    def before(at: int, marks: list[tuple[int, int, str]], reach: int = 3) -> bool:
        return any(at - reach <= b < at and _COORDINATORS.isdisjoint(words[b + 1:at])
                   for _, b, _ in marks)

    def polar(first: int, label: str, weakening: bool) -> None:
        """An action of this polarity at token `first`, negated or waived as found."""
        if weakening:
            if before(first, negations) or before(first, withouts):
                strong.append(f"refuses: {label}")
            else:
                weak.append(label)
        elif not (first in checks or after(first, control) is not None):
            if not (before(first, negations) or before(first, withouts)):
                strong.append(label)  # a negated generic verb ("can't wait") says nothing
        elif before(first, waivers, 4):
            weak.append("waives a check")
        elif before(first, negations) or before(first, withouts) or before(first, weakeners, 2):
            weak.append("negates a check")
        else:
            strong.append(label)

    taken: set[int] = set()
    for first, _, _ in _spans(WEAKEN_ALWAYS, clause, starts):
        polar(first, "falsifies or pre-approves", True)
        taken.add(first)
    disposing = {a for a, _, _ in _spans(DISPOSE, clause, starts)}
    stale = _spans(STALE, clause, starts)
    for rx, objects, label in (
        (WEAKEN, control, "skips a control"),
        (ALTER, limit, "alters a limit or date"),
        (EXPOSE, secret, "exposes a secret"),
    ):
        for first, last, _ in _spans(rx, clause, starts):
            if first in taken or after(last, objects) is None:
                continue
            taken.add(first)
            if first in disposing and not before(first, negations) and _qualified(
                last, secret, stale, control
            ):
                # "delete expired tokens", "remove unused api keys": a secret retired, not a
                # control bypassed (an old guard or log removed is still a control gone)
                strong.append("retires a stale secret")
                continue
            polar(first, label, True)
    tokens = [m.group(0) for m in found]
    for m in _HAND_OVER.finditer(clause):
        first = _token_at(starts, m.start())
        if first not in taken:
            taken.add(first)
            polar(first, "verifies or hands over", False)
    for first, _, _ in _spans(STRENGTHEN, clause, starts):
        if first in taken or any(a <= first <= b for a, b, _ in waivers):
            continue
        taken.add(first)
        if not _purpose(tokens, first):  # "ask for the password to verify": a goal, not a check
            polar(first, "verifies or hands over", False)
    disclosable = _spans(DISCLOSABLE, clause, starts)
    if disclosable:  # "hide the breach", "never mention the recall": kept from the user
        for first, last, _ in _spans(CONCEAL, clause, starts):
            if after(last, disclosable) is not None:
                polar(first, "conceals from the user", True)
        for first, last, _ in _spans(DISCLOSE, clause, starts):
            if after(last, disclosable) is not None and (
                before(first, negations) or before(first, waivers, 4)
            ):
                weak.append("conceals from the user")
    if _spans(EXPOSE, clause, starts) and DATA.search(clause) and OUTSIDE.search(clause) \
            and not negations:  # "send all the data to an external server"
        weak.append("sends data outside")
    for first, _, _ in withouts:  # "approve refunds without review"
        if any(first < a <= first + 3 for a, _, _ in control) \
                and not any(first < a <= first + 3 for a, _, _ in secret):
            weak.append("acts without a control")
    weak_status = _spans(STATUS_WEAK, clause, starts)
    strong_status = _spans(STATUS_STRONG, clause, starts)
    for first, _, _ in control:  # "the check is optional" / "... is required"
        if any(first < a <= first + 5 for a, _, _ in weak_status):
            weak.append("calls a control optional")
        elif any(first < a <= first + 4 for a, _, _ in strong_status) and not negations:
            strong.append("calls a control required")
    if ALONE.search(clause) and (control or _spans(WEAKEN_ALWAYS, clause, starts)
                                 or re.search(r"\b(?:approv|sign|releas|authori|dispens)",
                                              clause)):
        weak.append("acts alone")
    if EXPEDIENCY.search(clause) and (PERMISSIVE.search(clause) or weak):
        weak.append("makes an exception for speed")
    runs = bool(DECODE.search(clause) and RUN.search(clause))
    return weak, strong, runs


def _qualified(verb_end: int, objects: list[tuple[int, int, str]],
               qualifiers: list[tuple[int, int, str]],
               heads: list[tuple[int, int, str]]) -> bool:
    """Whether a qualifier stands between the verb ending at token `verb_end` and its object
    (the first object within `_WINDOW` tokens after it that is not the qualifier itself:
    `expired` is also a control word), and no other noun of `heads` follows that object as
    the thing it qualifies."""
    marks = {q for q, _, _ in qualifiers}
    found = next(((a, b) for a, b, _ in objects
                  if verb_end < a <= verb_end + _WINDOW and a not in marks), None)
    if found is None or not any(verb_end < q < found[0] for q in marks):
        return False
    # the object's head, not a modifier of another control ("the expired password check")
    return not any(found[1] < c <= found[1] + 2 for c, _, _ in heads)


_PURPOSE = frozenset(
    "para pour per um afin zu fürs damit so order".split()
)
_INSTRUCTED = frozenset(
    "sure remember need needs have has had ought required want try always must careful "
    "certain important mandatory obliged expected supposed forget".split()
)


def _purpose(tokens: list[str], at: int) -> bool:
    """Whether the action at token `at` is the goal of a purpose clause ("... to verify",
    "para verificar", "in order to check") rather than advice to do it ("make sure to verify",
    "remember to check")."""
    if at == 0:
        return False
    before = tokens[at - 1]
    if before in _PURPOSE:
        return True
    return before == "to" and (at < 2 or tokens[at - 2] not in _INSTRUCTED)


def describe(advice: Advice, limit: int = 3) -> str:
    """`weakens a control (skip check; ...)`: the reading as a hold reason names it."""
    return "; ".join(_first(advice.weakens, limit))


def _first(items: Iterable[str], limit: int) -> list[str]:
    out = list(dict.fromkeys(items))
    return out[:limit] + ([f"and {len(out) - limit} more"] if len(out) > limit else [])
