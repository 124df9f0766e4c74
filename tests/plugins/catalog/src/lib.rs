//! `tp-catalog`: tools with realistic names and descriptions that do
//! nothing, for the discovery eval (tests/integration/discovery.rs): with
//! the reference tools and `tp-imaging` (loaded as the namespace `image`)
//! they make the catalog `find_tools` searches. Every tool answers
//! `{"done": false}`.
use toolhost_sdk::{Context, Deserialize, JsonSchema, Serialize, SideEffect, Tool, ToolError};

/// What every tool of this catalog returns: it only stands in for a tool
/// with that contract, so that the discovery eval searches real
/// descriptors loaded from a real component.
#[derive(Serialize, JsonSchema)]
struct Stub {
    /// Always false: nothing was done.
    done: bool,
}

/// Answers every call the same way.
fn stub<A>(_: &Context, _: A) -> Result<Stub, ToolError> {
    Ok(Stub { done: false })
}

/// Arguments of `dir_list`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DirListArgs {
    /// Folder to list.
    path: Option<String>,
    /// Descend into subfolders.
    recursive: Option<String>,
}

/// Arguments of `file_move`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct FileMoveArgs {
    /// Current path.
    from: Option<String>,
    /// New path.
    to: Option<String>,
}

/// Arguments of `json_query`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct JsonQueryArgs {
    /// JSON text.
    document: Option<String>,
    /// JSONPath such as $.items[*].id.
    expression: Option<String>,
}

/// Arguments of `csv_summarize`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CsvSummarizeArgs {
    /// CSV file.
    path: Option<String>,
    /// Field separator.
    delimiter: Option<String>,
}

/// Arguments of `archive_extract`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ArchiveExtractArgs {
    /// Archive file.
    path: Option<String>,
    /// Folder to unpack into.
    dest: Option<String>,
}

/// Arguments of `archive_create`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ArchiveCreateArgs {
    /// Files and folders to pack.
    paths: Option<String>,
    /// Archive to write.
    output: Option<String>,
    /// Zip or tar.gz.
    format: Option<String>,
}

/// Arguments of `hash_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct HashFileArgs {
    /// File to digest.
    path: Option<String>,
    /// Sha256 or blake3.
    algorithm: Option<String>,
}

/// Arguments of `text_diff`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TextDiffArgs {
    /// First file.
    left: Option<String>,
    /// Second file.
    right: Option<String>,
    /// Lines of context around each change.
    context: Option<String>,
}

/// Arguments of `git_log`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct GitLogArgs {
    /// Only commits that changed this path.
    path: Option<String>,
    /// How many commits.
    limit: Option<String>,
}

/// Arguments of `git_status`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct GitStatusArgs {}

/// Arguments of `sql_query`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SqlQueryArgs {
    /// SQLite file.
    database: Option<String>,
    /// The SELECT statement.
    sql: Option<String>,
    /// Row limit.
    max_rows: Option<String>,
}

/// Arguments of `email_send`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct EmailSendArgs {
    /// Recipient addresses.
    to: Option<String>,
    /// Subject line.
    subject: Option<String>,
    /// Message text.
    body: Option<String>,
}

/// Arguments of `calendar_create_event`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CalendarCreateEventArgs {
    /// Start time.
    start: Option<String>,
    /// Length.
    duration_minutes: Option<String>,
    /// People invited.
    attendees: Option<String>,
    /// Room or link.
    location: Option<String>,
}

/// Arguments of `weather_forecast`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct WeatherForecastArgs {
    /// Place name.
    city: Option<String>,
    /// How many days ahead.
    days: Option<String>,
}

/// Arguments of `translate_text`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TranslateTextArgs {
    /// Passage.
    text: Option<String>,
    /// Language to translate into.
    target_language: Option<String>,
}

/// Arguments of `pdf_extract_text`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct PdfExtractTextArgs {
    /// PDF file.
    path: Option<String>,
    /// Page range.
    pages: Option<String>,
}

/// Arguments of `markdown_render`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct MarkdownRenderArgs {
    /// Markdown text.
    source: Option<String>,
}

/// Arguments of `clock_now`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ClockNowArgs {
    /// IANA zone such as Europe/Paris.
    timezone: Option<String>,
}

/// Arguments of `unit_convert`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct UnitConvertArgs {
    /// The quantity.
    value: Option<String>,
    /// Unit it is in.
    from_unit: Option<String>,
    /// Unit wanted.
    to_unit: Option<String>,
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("dir_list", stub::<DirListArgs>)
            .title("List a directory")
            .description("List the entries of a folder: names, kinds (file, directory, link) and sizes, sorted by name.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("file_move", stub::<FileMoveArgs>)
            .title("Move or rename a file")
            .description("Move a file to another path in the workspace, or give it a new name. Refuses to overwrite an existing target.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("json_query", stub::<JsonQueryArgs>)
            .title("Query JSON")
            .description("Evaluate a JSONPath expression against a JSON document and return the matching values.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("csv_summarize", stub::<CsvSummarizeArgs>)
            .title("Summarize a CSV table")
            .description("Read a comma-separated spreadsheet file and report its columns, row count and per-column statistics (min, max, mean, distinct values).")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("archive_extract", stub::<ArchiveExtractArgs>)
            .title("Extract an archive")
            .description("Unpack a zip or tar.gz archive into a folder of the workspace, refusing entries that would escape it.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("archive_create", stub::<ArchiveCreateArgs>)
            .title("Create an archive")
            .description("Pack files and folders into a zip or tar.gz archive.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("hash_file", stub::<HashFileArgs>)
            .title("Checksum a file")
            .description("Compute the SHA-256 or BLAKE3 digest of a file to verify its integrity or compare two copies.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("text_diff", stub::<TextDiffArgs>)
            .title("Compare two texts")
            .description("Show the differences between two files or strings as a unified diff with context lines.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("git_log", stub::<GitLogArgs>)
            .title("Show commit history")
            .description("List recent commits of the repository with author, date and message, optionally only those touching a path.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("git_status", stub::<GitStatusArgs>)
            .title("Show working tree changes")
            .description("Report which files are modified, staged, untracked or deleted in the repository's working tree.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("sql_query", stub::<SqlQueryArgs>)
            .title("Run a read-only SQL query")
            .description("Execute a SELECT statement against the project's SQLite database and return the rows as records.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("email_send", stub::<EmailSendArgs>)
            .title("Send an email")
            .description("Deliver a message to one or more recipients through the configured SMTP relay. Irreversible.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("calendar_create_event", stub::<CalendarCreateEventArgs>)
            .title("Schedule a meeting")
            .description("Add an appointment to the calendar with a start time, duration, attendees and location.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("weather_forecast", stub::<WeatherForecastArgs>)
            .title("Weather forecast")
            .description("Forecast temperature, rain and wind for a city for the next days.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("translate_text", stub::<TranslateTextArgs>)
            .title("Translate text")
            .description("Render a passage in another language, e.g. English to French or Japanese.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("pdf_extract_text", stub::<PdfExtractTextArgs>)
            .title("Extract text from a PDF")
            .description("Pull the plain text out of the pages of a PDF document, page by page.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("markdown_render", stub::<MarkdownRenderArgs>)
            .title("Render Markdown to HTML")
            .description("Convert a Markdown document to sanitized HTML.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("clock_now", stub::<ClockNowArgs>)
            .title("Current date and time")
            .description("Return the current date and time, in UTC or in a given time zone.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
        Tool::new("unit_convert", stub::<UnitConvertArgs>)
            .title("Convert units")
            .description("Convert a quantity between units of length, mass, temperature or volume, e.g. miles to kilometres.")
            .side_effect(SideEffect::ReadOnly)
            .timeout_ms(1_000)
            .max_output_bytes(64),
    ]
}

toolhost_sdk::plugin!(tools);
