/**
 * Structured logging as a port: text lines or JSON lines on stderr, with levels. Constructed in main.ts
 * and handed down; tests use `silentLogger` or a capturing logger.
 *
 * One event is one line, whatever it carries: messages and fields may hold strings a client chose (a
 * transactional id, a client id, a topic name), and a newline in one must not forge a line of its own.
 * - text: the message has its control characters escaped (`\n`, `\u001b`, ...); a string field is
 *   written bare when it is plain (printable, no space, quote, backslash or `=`) and as a JSON string
 *   otherwise, so that `key=value` pairs cannot be forged either; other values are JSON;
 * - json: JSON.stringify escapes control characters already; the line separators U+2028 and U+2029 and
 *   the C1 controls are escaped as well, for viewers that break lines on them. `time`, `level` and `msg`
 *   cannot be overwritten by a field of the same name.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";
const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export function createLogger(opts: {
  format: "text" | "json";
  level: LogLevel;
  write?: (line: string) => void;
  nowMs?: () => number;
}): Logger {
  const write = opts.write ?? ((line: string) => process.stderr.write(line + "\n"));
  const nowMs = opts.nowMs ?? Date.now;
  const min = rank[opts.level];
  const emit = (level: LogLevel, message: string, fields?: Record<string, unknown>) => {
    if (rank[level] < min) return;
    const time = new Date(nowMs()).toISOString();
    if (opts.format === "json") {
      // The fixed keys first for the reader, and again last so that a field of the same name cannot win.
      const fixed = { time, level, msg: message };
      write(escapeLineBreakers(toJson({ ...fixed, ...fields, ...fixed })));
    } else {
      const extra = fields
        ? " " + Object.entries(fields).map(([k, v]) => `${escapeControls(k)}=${formatTextValue(v)}`).join(" ")
        : "";
      write(`${time} ${level.toUpperCase().padEnd(5)} ${escapeControls(message)}${extra}`);
    }
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

/** C0 controls, DEL, C1 controls, and the Unicode line and paragraph separators. */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;
/** What JSON.stringify leaves as is but a line-oriented viewer may still break on. */
const LINE_BREAKERS = /[\u007f-\u009f\u2028\u2029]/g;
/** A string that can stand bare after `key=`: no control, space, quote, backslash or equals sign. */
const PLAIN = /^[^\u0000-\u0020\u007f-\u009f\u2028\u2029"\\=]+$/;

const SHORT_ESCAPES: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
const unicodeEscape = (c: string) => SHORT_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

/** The message of a text line: control characters become escapes; a backslash stays as it is. */
export function escapeControls(text: string): string {
  return text.replace(CONTROLS, unicodeEscape);
}

function escapeLineBreakers(json: string): string {
  return json.replace(LINE_BREAKERS, unicodeEscape);
}

function formatTextValue(value: unknown): string {
  if (typeof value === "string") return PLAIN.test(value) ? value : escapeLineBreakers(JSON.stringify(value));
  if (typeof value === "bigint") return value.toString();
  // JSON.stringify gives undefined for undefined and functions: say so rather than print nothing.
  return escapeLineBreakers(toJson(value) ?? String(value));
}

/** JSON.stringify that writes a bigint (an etcd revision, say) as its digits instead of throwing. */
function toJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
}
