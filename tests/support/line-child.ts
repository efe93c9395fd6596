/**
 * A client program run as a child process by interop tests: its stdout and stderr collected as they come,
 * lines written to its stdin, bounded waits for what it prints. Every live child is in `liveChildren`, so
 * that a test file's afterAll can kill what a failed test left running (`killLiveChildren`).
 */

export const liveChildren = new Set<LineChild>();

export class LineChild {
  readonly proc: Bun.Subprocess<"pipe", "pipe", "pipe">;
  stdout = "";
  stderr = "";
  done = false;
  /** The exit code, once stdout and stderr are drained too. */
  readonly exited: Promise<number>;

  constructor(
    readonly label: string,
    cmd: string[],
  ) {
    this.proc = Bun.spawn(cmd, { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
    liveChildren.add(this);
    const drain = async (stream: ReadableStream<Uint8Array>, into: "stdout" | "stderr") => {
      const decoder = new TextDecoder();
      for await (const chunk of stream) this[into] += decoder.decode(chunk, { stream: true });
    };
    const drained = Promise.all([drain(this.proc.stdout, "stdout"), drain(this.proc.stderr, "stderr")]).catch(() => undefined);
    this.exited = Promise.all([this.proc.exited, drained]).then(([code]) => {
      this.done = true;
      liveChildren.delete(this);
      return code;
    });
  }

  /** Waits until stdout matches `re` (fails at once if the process exits first). */
  async waitFor(re: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = this.stdout.match(re);
      if (m) return m;
      if (this.done) throw new Error(`${this.label} exited (${this.proc.exitCode}) before printing ${re}\n${this.output()}`);
      if (Date.now() > deadline) throw new Error(`${this.label} did not print ${re} within ${timeoutMs} ms\n${this.output()}`);
      await Bun.sleep(20);
    }
  }

  /** The exit code, or undefined when it had to be SIGKILLed after `timeoutMs`. */
  async exitCodeWithin(timeoutMs: number): Promise<number | undefined> {
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), timeoutMs);
    const code = await this.exited;
    clearTimeout(timer);
    return this.proc.signalCode === "SIGKILL" ? undefined : code;
  }

  /** The exit code; fails with the output when it takes longer than `timeoutMs`. */
  async exitWithin(timeoutMs: number): Promise<number> {
    const code = await this.exitCodeWithin(timeoutMs);
    if (code === undefined) throw new Error(`${this.label} did not exit within ${timeoutMs} ms\n${this.output()}`);
    return code;
  }

  line(text: string): void {
    this.proc.stdin.write(`${text}\n`);
    void this.proc.stdin.flush();
  }

  async kill(): Promise<void> {
    this.proc.kill("SIGKILL");
    await this.exited;
  }

  output(): string {
    return `--- ${this.label} stdout ---\n${this.stdout}--- stderr (tail) ---\n${this.stderr.slice(-4000)}`;
  }
}

/** SIGKILLs every child still running and waits for them. */
export async function killLiveChildren(): Promise<void> {
  const left = [...liveChildren];
  for (const child of left) child.proc.kill("SIGKILL");
  await Promise.all(left.map((c) => c.exited));
}
