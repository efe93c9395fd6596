/**
 * Structured logging as a port: text lines or JSON lines on stderr, with levels. Constructed in main.ts
 * and handed down; tests use `silentLogger` or a capturing logger.
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
      write(JSON.stringify({ time, level, msg: message, ...fields }));
    } else {
      const extra = fields
        ? " " + Object.entries(fields).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`).join(" ")
        : "";
      write(`${time} ${level.toUpperCase().padEnd(5)} ${message}${extra}`);
    }
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}
