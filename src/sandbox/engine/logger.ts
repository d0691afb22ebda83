/** pino-compatible subset: `(obj, msg)` */
export interface SandboxLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

const noop = (): void => {};
export const silentLogger: SandboxLogger = { info: noop, warn: noop, error: noop, debug: noop };
