//! The secret rules: one entry per well-known secret form.
//!
//! Each rule is a regular expression, the capture group that holds the
//! secret itself (the rest is context, kept in the output: `password=` stays,
//! the password goes), and an optional check that a match must pass. The
//! forms are facts about the issuers' token formats:
//!
//! | rule | form |
//! |---|---|
//! | `private_key` | a PEM or OpenSSH `-----BEGIN … PRIVATE KEY-----` block (to its END line, or to the end of a cut-off text); PGP private key blocks too; the body lines above an END line whose BEGIN line the text does not hold, and a block spread over the items of an array (see `redact::blocks`) |
//! | `aws_access_key_id` | `AKIA`/`ASIA`/`ABIA`/`ACCA` + 16 base-32 characters |
//! | `aws_secret_key` | 40 base-64 characters assigned to an AWS secret key name (`aws_secret_access_key=`, `"SecretAccessKey":`), or standing alone within 160 characters after an access key id; mixed case required |
//! | `github_token` | `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + 36 or more alphanumerics; `github_pat_` fine-grained tokens |
//! | `gitlab_token` | `glpat-`, `gldt-`, `glrt-`, `glptt-`, `glcbt-`, `glft-`, `glsoat-`, `glimt-` + 20 or more characters |
//! | `slack_token` | `xoxb-`, `xoxp-`, `xoxa-`, `xoxo-`, `xoxs-`, `xoxr-`, `xoxe-` and `xapp-` tokens |
//! | `slack_webhook` | the secret path of a `hooks.slack.com` webhook URL |
//! | `stripe_key` | `sk_live_`/`sk_test_`/`rk_live_`/`rk_test_` keys, `whsec_` webhook secrets (publishable `pk_` keys are public) |
//! | `google_api_key` | `AIza` + 35 characters |
//! | `google_oauth_secret` | `GOCSPX-` + 28 characters |
//! | `openai_api_key` | `sk-proj-`, `sk-svcacct-`, `sk-admin-` keys; legacy `sk-…T3BlbkFJ…` keys |
//! | `anthropic_api_key` | `sk-ant-api03-…`, `sk-ant-admin01-…`-style keys |
//! | `huggingface_token` | `hf_` + 34 letters |
//! | `npm_token` | `npm_` + 36 alphanumerics |
//! | `pypi_token` | `pypi-AgEIcHlwaS5vcmc…` (a macaroon for pypi.org) |
//! | `sendgrid_key` | `SG.` + 22 + `.` + 43 characters |
//! | `digitalocean_token` | `dop_v1_`/`doo_v1_`/`dor_v1_` + 64 hex |
//! | `shopify_token` | `shpat_`/`shpca_`/`shppa_`/`shpss_` + 32 hex |
//! | `azure_storage_key` | `AccountKey=` + 88 base-64 characters |
//! | `telegram_bot_token` | bot id `:AA` + 33 characters |
//! | `discord_webhook` | the token of a Discord webhook URL |
//! | `jwt` | three base64url segments whose first decodes to a JSON header with `alg` |
//! | `authorization_header` | the credentials of an `Authorization: Bearer/Basic/Token …` header; in JSON, the value of a credential header pair (`authorization`, `proxy-authorization`, `x-api-key`, `x-auth-token`, `cookie`, `set-cookie`) |
//! | `connection_string_password` | the password of `scheme://user:password@host` (not a placeholder, not the user name repeated, at least 4 characters) |
//! | `netrc_password` | the `password` value of a `.netrc` entry: a one-line `machine … login … password` entry, or a line holding only the `password` token and its value (not a quoted, templated or escaped value) |
//! | `secret_assignment` | a high-entropy value assigned to a secret-looking name (`password=`, `api_key: …`, `"client_secret": "…"`) |
//!
//! `secret_assignment` is the catch-all and the one most prone to false
//! positives, so its value must look random: at least 8 characters, two or
//! more character classes, a Shannon entropy of at least 3 bits per
//! character, and not a placeholder (`changeme`, `<…>`, `${…}`, `****`,
//! `example`), an identifier, a type, a path or an expression (`String`,
//! `self.password`, `Option<String>`, `get_token()`).

use std::sync::LazyLock;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use regex::Regex;
use serde::Serialize;

/// A secret form. Serialized as its snake_case id, which is also the text
/// of the redaction marker (`[REDACTED:aws_secret_key]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretRule {
    PrivateKey,
    AwsAccessKeyId,
    AwsSecretKey,
    GithubToken,
    GitlabToken,
    SlackToken,
    SlackWebhook,
    StripeKey,
    GoogleApiKey,
    GoogleOauthSecret,
    OpenaiApiKey,
    AnthropicApiKey,
    HuggingfaceToken,
    NpmToken,
    PypiToken,
    SendgridKey,
    DigitaloceanToken,
    ShopifyToken,
    AzureStorageKey,
    TelegramBotToken,
    DiscordWebhook,
    Jwt,
    AuthorizationHeader,
    ConnectionStringPassword,
    NetrcPassword,
    SecretAssignment,
}

impl SecretRule {
    /// The stable snake_case id.
    pub fn id(self) -> &'static str {
        match self {
            SecretRule::PrivateKey => "private_key",
            SecretRule::AwsAccessKeyId => "aws_access_key_id",
            SecretRule::AwsSecretKey => "aws_secret_key",
            SecretRule::GithubToken => "github_token",
            SecretRule::GitlabToken => "gitlab_token",
            SecretRule::SlackToken => "slack_token",
            SecretRule::SlackWebhook => "slack_webhook",
            SecretRule::StripeKey => "stripe_key",
            SecretRule::GoogleApiKey => "google_api_key",
            SecretRule::GoogleOauthSecret => "google_oauth_secret",
            SecretRule::OpenaiApiKey => "openai_api_key",
            SecretRule::AnthropicApiKey => "anthropic_api_key",
            SecretRule::HuggingfaceToken => "huggingface_token",
            SecretRule::NpmToken => "npm_token",
            SecretRule::PypiToken => "pypi_token",
            SecretRule::SendgridKey => "sendgrid_key",
            SecretRule::DigitaloceanToken => "digitalocean_token",
            SecretRule::ShopifyToken => "shopify_token",
            SecretRule::AzureStorageKey => "azure_storage_key",
            SecretRule::TelegramBotToken => "telegram_bot_token",
            SecretRule::DiscordWebhook => "discord_webhook",
            SecretRule::Jwt => "jwt",
            SecretRule::AuthorizationHeader => "authorization_header",
            SecretRule::ConnectionStringPassword => "connection_string_password",
            SecretRule::NetrcPassword => "netrc_password",
            SecretRule::SecretAssignment => "secret_assignment",
        }
    }
}

impl std::fmt::Display for SecretRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// What a match must also satisfy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    None,
    /// The header segment decodes to a JSON object with `alg`.
    Jwt,
    /// 40 base-64 characters not part of a longer run, mixed case.
    AwsSecret,
    /// A real password, not a placeholder or the user name again.
    ConnectionPassword,
    /// A value that looks random (see [`looks_like_secret_value`]).
    RandomValue,
}

pub struct RuleDef {
    pub rule: SecretRule,
    pub pattern: &'static str,
    /// Capture group of the secret (0: the whole match).
    pub group: usize,
    pub check: Check,
}

/// Literals at least one of which every match of the rule contains
/// (compared without case): a text without any of them is not searched
/// with the rule's pattern. Each planted example in the tests passes
/// through this filter, so a trigger missing here fails them.
pub fn triggers(rule: SecretRule) -> &'static [&'static str] {
    use SecretRule::*;
    match rule {
        PrivateKey => &["-----BEGIN", "-----END"],
        AwsAccessKeyId => &["AKIA", "ASIA", "ABIA", "ACCA"],
        AwsSecretKey => &["secret"],
        GithubToken => &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        GitlabToken => &[
            "glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glsoat-", "glimt-",
        ],
        SlackToken => &["xox", "xapp-"],
        SlackWebhook => &["hooks.slack.com"],
        StripeKey => &["sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"],
        GoogleApiKey => &["AIza"],
        GoogleOauthSecret => &["GOCSPX-"],
        OpenaiApiKey => &["sk-"],
        AnthropicApiKey => &["sk-ant-"],
        HuggingfaceToken => &["hf_"],
        NpmToken => &["npm_"],
        PypiToken => &["pypi-"],
        SendgridKey => &["SG."],
        DigitaloceanToken => &["_v1_"],
        ShopifyToken => &["shpat_", "shpca_", "shppa_", "shpss_"],
        AzureStorageKey => &["AccountKey="],
        TelegramBotToken => &[":AA"],
        DiscordWebhook => &["/api/webhooks/"],
        Jwt => &["eyJ"],
        AuthorizationHeader => &["authorization"],
        ConnectionStringPassword => &["://"],
        NetrcPassword => &["password"],
        SecretAssignment => &[
            "pass",
            "pwd",
            "secret",
            "api",
            "access",
            "private",
            "token",
            "credential",
            "signing",
            "encryption",
            "master",
        ],
    }
}

/// Names whose values are secrets (in `name = value` text and as JSON
/// member names).
pub const SECRET_NAME: &str = r"(?:pass(?:word|wd|phrase)?|pwd|secret|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|auth[_\-]?token|access[_\-]?token|refresh[_\-]?token|session[_\-]?token|bearer[_\-]?token|token|credentials?|client[_\-]?secret|signing[_\-]?key|encryption[_\-]?key|master[_\-]?key)";

pub static RULES: LazyLock<Vec<RuleDef>> = LazyLock::new(|| {
    use SecretRule::*;
    let (none, random) = (Check::None, Check::RandomValue);
    let def = |rule, pattern: &'static str, group, check| RuleDef {
        rule,
        pattern,
        group,
        check,
    };
    vec![
        def(
            PrivateKey,
            r"(?s)-----BEGIN[ A-Z0-9]{0,24}PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[ A-Z0-9]{0,24}PRIVATE KEY(?: BLOCK)?-----|\z)",
            0,
            none,
        ),
        def(
            AwsAccessKeyId,
            r"\b((?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b",
            1,
            none,
        ),
        def(
            AwsSecretKey,
            r#"(?i)(?:aws_?secret_?(?:access_?)?key|secret_?access_?key)["']?\s*(?:[:=]|=>)\s*["']?([A-Za-z0-9/+]{40})"#,
            1,
            Check::AwsSecret,
        ),
        def(
            GithubToken,
            r"\b((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,251})\b",
            1,
            none,
        ),
        def(
            GithubToken,
            r"\b(github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})\b",
            1,
            none,
        ),
        def(
            GitlabToken,
            r"\b((?:glpat|gldt|glrt|glptt|glcbt|glft|glsoat|glimt)-[A-Za-z0-9_\-.]{20,})",
            1,
            none,
        ),
        def(
            SlackToken,
            r"\b(xox[abposre]-[A-Za-z0-9\-]{10,250})",
            1,
            none,
        ),
        def(SlackToken, r"\b(xapp-\d-[A-Za-z0-9\-]{10,250})", 1, none),
        def(
            SlackWebhook,
            r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9/_\-]{20,})",
            1,
            none,
        ),
        def(
            StripeKey,
            r"\b((?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,247})\b",
            1,
            none,
        ),
        def(StripeKey, r"\b(whsec_[A-Za-z0-9+/=]{32,})", 1, none),
        def(GoogleApiKey, r"\b(AIza[0-9A-Za-z_\-]{35})", 1, none),
        def(GoogleOauthSecret, r"\b(GOCSPX-[A-Za-z0-9_\-]{28})", 1, none),
        def(
            OpenaiApiKey,
            r"\b(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,})",
            1,
            none,
        ),
        def(
            OpenaiApiKey,
            r"\b(sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})\b",
            1,
            none,
        ),
        def(
            AnthropicApiKey,
            r"\b(sk-ant-(?:api|admin|oat|sid)\d{2}-[A-Za-z0-9_\-]{80,})",
            1,
            none,
        ),
        def(HuggingfaceToken, r"\b(hf_[A-Za-z]{34})\b", 1, none),
        def(NpmToken, r"\b(npm_[A-Za-z0-9]{36})\b", 1, none),
        def(
            PypiToken,
            r"\b(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,})",
            1,
            none,
        ),
        def(
            SendgridKey,
            r"\b(SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43})",
            1,
            none,
        ),
        def(DigitaloceanToken, r"\b(do[opr]_v1_[a-f0-9]{64})\b", 1, none),
        def(
            ShopifyToken,
            r"\b(shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32})\b",
            1,
            none,
        ),
        def(
            AzureStorageKey,
            r"(?i)AccountKey=([A-Za-z0-9+/]{86}==)",
            1,
            none,
        ),
        def(
            TelegramBotToken,
            r"\b(\d{8,10}:AA[A-Za-z0-9_\-]{33})\b",
            1,
            none,
        ),
        def(
            DiscordWebhook,
            r"discord(?:app)?\.com/api/webhooks/\d{5,30}/([A-Za-z0-9_\-]{60,})",
            1,
            none,
        ),
        def(
            Jwt,
            r"\b(eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})",
            1,
            Check::Jwt,
        ),
        def(
            AuthorizationHeader,
            r#"(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:bearer|basic|token|digest|apikey)\s+([A-Za-z0-9._~+/\-]{12,}=*)"#,
            1,
            none,
        ),
        def(
            ConnectionStringPassword,
            // Anchored on the literal `://` (the scheme adds nothing, and
            // a leading class would cost a slow scan of every position).
            r#"://([^\s:/@'"<>]{1,128}):([^\s@/'"<>]{1,256})@[^\s/'"<>]"#,
            2,
            Check::ConnectionPassword,
        ),
        def(
            NetrcPassword,
            // A `.netrc` entry on one line: the machine (or `default`),
            // optional login and account tokens, then the password.
            r#"(?m)\b(?:machine[ \t]+\S+|default)(?:[ \t]+(?:login|account)[ \t]+\S+)*[ \t]+password[ \t]+([^\s"'`{}<>\\]{1,256})(?:[ \t\r]|$)"#,
            1,
            none,
        ),
        def(
            NetrcPassword,
            // A `.netrc` entry over several lines: a line holding only
            // `password X` (no assignment sign, so not prose).
            r#"(?m)^[ \t]*password[ \t]+([^\s"'`{}<>\\=:][^\s"'`{}<>\\]{0,255})[ \t\r]*$"#,
            1,
            none,
        ),
        def(
            SecretAssignment,
            // The name, optional suffix characters and closing quote, an
            // assignment, and the value (quoted or bare).
            r#"(?i)(?:pass(?:word|wd|phrase)?|pwd|secret|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|token|credentials?|client[_\-]?secret|signing[_\-]?key|encryption[_\-]?key|master[_\-]?key)[a-z0-9_\-]{0,24}["']?\s*(?:[:=]|:=|=>)\s*["']?([^\s"'`,;]{8,256})"#,
            1,
            random,
        ),
    ]
});

/// The JSON member names whose string values are secrets as a whole.
pub static SECRET_NAME_RX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)^[a-z0-9_.\-]{{0,32}}{SECRET_NAME}s?[a-z0-9_\-]{{0,16}}$"
    ))
    .expect("secret name pattern compiles")
});

/// AWS secret key member names (`SecretAccessKey`, `aws_secret_access_key`).
pub static AWS_SECRET_NAME_RX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:aws_?)?secret_?(?:access_?)?key$").expect("aws name pattern compiles")
});

/// A standalone 40-character base-64 run, for the AWS key pair rule.
pub static BASE64_40_RX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9/+]{40}").expect("base64 pattern compiles"));

fn is_base64_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'/' || b == b'+'
}

/// The 40-character run at `start..end` of `text` stands alone (no
/// base-64 character on either side) and mixes upper case, lower case and
/// digits, as a random AWS secret key does (a git SHA-1 is lowercase hex).
pub fn aws_secret_ok(text: &str, start: usize, end: usize) -> bool {
    let bytes = text.as_bytes();
    let alone = (start == 0 || !is_base64_char(bytes[start - 1]))
        && (end == bytes.len() || !is_base64_char(bytes[end]) && bytes[end] != b'=');
    let value = &bytes[start..end];
    alone
        && value.iter().any(u8::is_ascii_uppercase)
        && value.iter().any(u8::is_ascii_lowercase)
        && value.iter().any(u8::is_ascii_digit)
}

/// The header segment of a JWT decodes to a JSON object naming `alg`.
pub fn jwt_ok(token: &str) -> bool {
    let header = token.split('.').next().unwrap_or("");
    URL_SAFE_NO_PAD
        .decode(header)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|v| v.get("alg").is_some())
}

const PLACEHOLDER_WORDS: [&str; 13] = [
    "example",
    "placeholder",
    "changeme",
    "change_me",
    "your",
    "xxxx",
    "redacted",
    "dummy",
    "sample",
    "secret_here",
    "password",
    "passwd",
    "undefined",
];

fn is_placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    value.starts_with(['$', '<', '{', '%', '['])
        || value.contains("${")
        || value.contains("{{")
        || value
            .bytes()
            .all(|b| b == b'*' || b == b'x' || b == b'X' || b == b'.')
        || PLACEHOLDER_WORDS.iter().any(|w| lower.contains(w))
}

/// The password of a connection string is worth hiding: not a
/// placeholder, not the user name repeated, at least 4 characters.
pub fn connection_password_ok(user: &str, password: &str) -> bool {
    password.chars().count() >= 4 && password != user && !is_placeholder(password)
}

/// Shannon entropy in bits per byte.
pub fn entropy(value: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in value.bytes() {
        counts[b as usize] += 1;
    }
    let len = value.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / len;
            -p * p.log2()
        })
        .sum()
}

/// A value assigned to a secret-looking name that looks like a secret
/// rather than code, a type, a word or a placeholder.
pub fn looks_like_secret_value(value: &str) -> bool {
    let value = value.trim_end_matches(['"', '\'', ')', ']', '}', '.']);
    if value.len() < 8 || is_placeholder(value) {
        return false;
    }
    // Expressions, types, calls, paths and references (a value starting
    // with `:` is the rest of a `::` path).
    if value.contains(['(', ')', '<', '>', '[', ']', '{', '}', '\\', '&'])
        || value.starts_with([':', '=', '>'])
        || value.contains("::")
        || value.contains("->")
        || value.starts_with('/')
        || value.starts_with("./")
    {
        return false;
    }
    // Words, identifiers and attribute chains (`tokenString`,
    // `password_hash`, `self.token`, `config.api_key`, `chained-HMAC`):
    // letters, digits, underscores, dots and hyphens starting with a
    // letter, with at most one digit.
    // A random value of 8+ characters almost always holds two digits or a
    // symbol.
    let identifier_like = value.as_bytes()[0].is_ascii_alphabetic()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        && value.bytes().filter(u8::is_ascii_digit).count() <= 1;
    if identifier_like {
        return false;
    }
    let classes = [
        value.bytes().any(|b| b.is_ascii_lowercase()),
        value.bytes().any(|b| b.is_ascii_uppercase()),
        value.bytes().any(|b| b.is_ascii_digit()),
        value.bytes().any(|b| !b.is_ascii_alphanumeric()),
    ]
    .iter()
    .filter(|&&c| c)
    .count();
    classes >= 2 && entropy(value) >= 3.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_compiles_and_ids_are_unique() {
        for r in RULES.iter() {
            let rx = Regex::new(r.pattern).unwrap_or_else(|e| panic!("{}: {e}", r.rule));
            assert!(r.group < rx.captures_len(), "{}", r.rule);
        }
        let mut ids: Vec<&str> = RULES.iter().map(|r| r.rule.id()).collect();
        ids.dedup();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(ids.len(), sorted.len(), "each rule's patterns are adjacent");
        assert!(SECRET_NAME_RX.is_match("db_password"));
        assert!(SECRET_NAME_RX.is_match("client_secret"));
        assert!(SECRET_NAME_RX.is_match("GITHUB_TOKEN"));
        assert!(!SECRET_NAME_RX.is_match("sha256"));
        assert!(!SECRET_NAME_RX.is_match("path"));
        assert!(AWS_SECRET_NAME_RX.is_match("SecretAccessKey"));
        assert!(AWS_SECRET_NAME_RX.is_match("aws_secret_access_key"));
    }

    #[test]
    fn value_heuristics() {
        for secret in [
            "s3cr3t-P4ss!",
            "hunter2Hunter7!",
            "a8f5f167f44f4964e6c998dee827110c",
            "Zx9#kLq2$wPm",
        ] {
            assert!(looks_like_secret_value(secret), "{secret}");
        }
        for not in [
            "String",
            "Option<String>",
            "self.password",
            "config.api_key",
            "get_token()",
            "password_hash",
            "tokenString",
            "someTokenValue",
            ":RegistryAuth",
            "chained-HMAC",
            "changeme123",
            "${DB_PASSWORD}",
            "<your-key>",
            "********",
            "true",
            "abcdefgh",
            "/run/secrets/db",
            "12345678",
            "example-key-123",
        ] {
            assert!(!looks_like_secret_value(not), "{not}");
        }
        assert!(entropy("aaaaaaaa") < 0.01);
        assert!((entropy("abcd") - 2.0).abs() < 1e-9);
        assert!(connection_password_ok("app", "Xk2!pw9q"));
        assert!(!connection_password_ok("toolhost", "toolhost"));
        assert!(!connection_password_ok("u", "p"));
        assert!(!connection_password_ok("u", "$PASSWORD"));
        assert!(!connection_password_ok("user", "password"));
    }
}
