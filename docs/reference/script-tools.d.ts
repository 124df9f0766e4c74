declare const tools: {
  /** Delete file */
  file_delete(args: { path: string; expected_sha256?: string | null }): Promise<{ path: string; deleted: true; sha256_before: string | null; bytes: number | null }>;
  /** Edit file */
  file_edit(args: { path: string; old_str: string; new_str: string; allow_multiple?: boolean; expected_sha256?: string | null }): Promise<{ path: string; replacements: number; sha256_before: string; sha256_after: string }>;
  /** View file */
  file_view(args: { path: string; offset?: number; limit?: number; column?: number }): Promise<{ path: string; offset: number; column: number; lines: string[]; total_lines: number; has_more: boolean; next: { offset: number; column: number } | null; clipped: { line: number; line_bytes: number; from_byte: number; shown_bytes: number; omitted_bytes: number } | null; sha256: string }>;
  /** Search files */
  grep_search(args: { pattern: string; path: string; glob?: string | null; limit?: number; cursor?: string | null }): Promise<{ matches: Array<{ path: string; line_number: number; line: string }>; total: number; next_cursor: string | null; files_scanned: number; files_skipped: number; truncated: boolean }>;
  /** Fetch a URL (HTTP GET) */
  http_get(args: { url: string; max_bytes?: number; timeout_ms?: number }): Promise<{ url: string; status: number; headers: Array<{ name: string; value: string }>; body: string; body_truncated: boolean; content_type: string | null }>;
  /** Run a program */
  run_command(args: { argv: string[]; cwd?: string | null; stdin?: string | null; timeout_ms?: number | null }): Promise<{ exit_code: number | null; signal: number | null; timed_out: boolean; duration_ms: number; stdout: string; stderr: string; stdout_omitted_bytes: number; stderr_omitted_bytes: number }>;
};
