/**
 * The probe that once passed silently, against the compiled binary: commit a transaction, stop the broker
 * cleanly (SIGTERM), then damage the transactional id's slot journal and start again. Before the journals
 * carried a header and the clean-shutdown record existed, a journal that lost its last record (the
 * CompleteCommit) made the committed transaction show as ongoing or aborted, and an emptied one made the
 * broker forget the id and hand out a new producer id on InitProducerId. Now each start is refused: the
 * process prints one line naming the journal and what is wrong, and exits 1 before it listens. With the
 * journal put back, the broker starts and the transaction is still CompleteCommit under its producer id.
 *
 *   bun test --timeout 300000 tests/fault/state-file-damage.test.ts
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { slotOf } from "../../src/cluster/ownership.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { txnJournalPath } from "../../src/storage/txn-state-store.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { BunkaProcess, CAN_RUN_BINARY, withBrokerLog } from "../support/binary.ts";
import { faultTestDir, stopBroker } from "../support/fault-support.ts";
import { describeSettledTxn } from "../support/txn-requests.ts";
import { until } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";

const fault = faultTestDir("bunka-state-damage-");
const TOPIC = "damage";
const ID = "probe-txn";

async function commitOneTransaction(c: WireClient): Promise<{ producerId: number; producerEpoch: number }> {
  const created = await c.request(19, 7, { topics: [{ name: TOPIC, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 1000, validateOnly: false });
  expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
  const init = await until("InitProducerId served", 30_000, async () => {
    const res = await c.request(22, 4, { transactionalId: ID, transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
    return res.errorCode === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS ? undefined : res;
  });
  expect(init.errorCode).toBe(ErrorCode.NONE);
  const p = { producerId: init.producerId as number, producerEpoch: init.producerEpoch as number };
  const added = await c.request(24, 3, {
    v3AndBelowTransactionalId: ID,
    v3AndBelowProducerId: p.producerId,
    v3AndBelowProducerEpoch: p.producerEpoch,
    v3AndBelowTopics: [{ name: TOPIC, partitions: [0] }],
  });
  expect(added.resultsByTopicV3AndBelow[0].resultsByPartition[0].partitionErrorCode).toBe(ErrorCode.NONE);
  const records = buildBatch({ records: [{ value: "committed" }], producerId: p.producerId, producerEpoch: p.producerEpoch, baseSequence: 0, transactional: true });
  const produced = await c.request(0, 9, { transactionalId: ID, acks: -1, timeoutMs: 30_000, topicData: [{ name: TOPIC, partitionData: [{ index: 0, records }] }] });
  expect(produced.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
  const ended = await c.request(26, 3, { transactionalId: ID, producerId: p.producerId, producerEpoch: p.producerEpoch, committed: true });
  expect(ended.errorCode).toBe(ErrorCode.NONE);
  expect((await describeSettledTxn(c, ID)).transactionState).toBe("CompleteCommit");
  return p;
}

/** Starts the binary and expects it to refuse: exit 1 before the start-up line, one line on stderr. */
async function expectRefusedStart(pattern: RegExp): Promise<string> {
  const before = readFileSync(fault.logFile, "utf8").length;
  const error = await BunkaProcess.start(fault.startOptions()).then(
    async (broker) => {
      await broker.kill("SIGKILL");
      return undefined;
    },
    (e: unknown) => e as Error,
  );
  expect(error).toBeInstanceOf(Error);
  expect(error!.message).toMatch(/exited with 1 before the start-up line/);
  const stderr = readFileSync(fault.logFile, "utf8").slice(before);
  const lines = stderr.split("\n").filter((line) => line.length > 0);
  const last = lines.at(-1)!;
  expect(last).toMatch(/^bunka: /);
  expect(last).toContain(txnJournalPath(fault.dataDir, slotOf(ID)));
  expect(last).toMatch(pattern);
  return last;
}

describe.skipIf(!CAN_RUN_BINARY)("a damaged transaction-state journal after a clean shutdown (compiled binary)", () => {
  test("records lost at the end, or the whole journal emptied, refuse the start; the journal put back starts with the transaction committed", async () => {
    await withBrokerLog(fault.logFile, async () => {
      let broker = await BunkaProcess.start(fault.startOptions());
      let c = await WireClient.connect(broker.port);
      const p = await commitOneTransaction(c);
      c.close();
      await stopBroker(broker, true, fault.logFile);

      const journal = txnJournalPath(fault.dataDir, slotOf(ID));
      const good = readFileSync(journal);
      const lines = good.toString("utf8").split(/(?<=\n)/).filter((line) => line.length > 0);
      // The header, then the id's writes; the last one is CompleteCommit.
      expect(lines.length).toBeGreaterThan(2);
      expect(lines.at(-1)).toContain('"state":"CompleteCommit"');

      // The last record cut off at its boundary: what a lost write-back or a truncation leaves.
      writeFileSync(journal, lines.slice(0, -1).join(""));
      await expectRefusedStart(/records were lost/);
      // A retried start is refused too (the clean-shutdown record stays until the broker writes).
      await expectRefusedStart(/records were lost/);
      // The journal emptied.
      writeFileSync(journal, "");
      await expectRefusedStart(/is 0 bytes .*records were lost/);

      // Put back: the broker starts and nothing was lost or replaced.
      writeFileSync(journal, good);
      broker = await BunkaProcess.start(fault.startOptions());
      c = await WireClient.connect(broker.port);
      const state = await until("the coordinator loaded", 30_000, async () => {
        const s = await describeSettledTxn(c, ID);
        return s.errorCode === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS ? undefined : s;
      });
      expect(state.transactionState).toBe("CompleteCommit");
      expect(Number(state.producerId)).toBe(p.producerId);
      const again = await c.request(22, 4, { transactionalId: ID, transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
      expect(again.errorCode).toBe(ErrorCode.NONE);
      expect(again.producerId).toBe(p.producerId);
      expect(again.producerEpoch).toBe(p.producerEpoch + 1);
      c.close();
      await stopBroker(broker, true, fault.logFile);
    });
  });
});
