/**
 * A logger for tests that keeps only what is logged at error level (where the dispatcher reports a handler
 * that threw), as "<message> <fields as JSON>", so that a test can require that none was logged:
 *
 *   const { log, errors } = errorCapturingLogger();
 *   broker = await startTestBroker({}, { log });
 *   ...
 *   expect(errors).toEqual([]);
 */
import type { Logger } from "../../src/platform/logger.ts";

export function errorCapturingLogger(): { log: Logger; errors: string[] } {
  const errors: string[] = [];
  const log: Logger = {
    debug() {},
    info() {},
    warn() {},
    error(message, fields) {
      errors.push(`${message} ${JSON.stringify(fields)}`);
    },
  };
  return { log, errors };
}
