/**
 * Regression (found by the wire fuzz, which failed with "A FileHandle object was closed during garbage
 * collection ... fuzz-c-0/00000000000000000000.log"): two DeleteTopics of the same topic at once leaked
 * the partition's segment file handle.
 *
 * The first delete took the open partition out of the partition manager and started closing it (its
 * close writes a last producer-state snapshot first). The second delete found nothing left to close, went
 * straight on to rename the partition directory away and remove it, so the first one's snapshot write
 * failed (ENOENT), Partition.close threw before it reached PartitionLog.close, the segment file stayed open
 * on a deleted file until the garbage collector closed it, and the first delete was answered
 * UNKNOWN_SERVER_ERROR. Now a delete waits for every close of the topic's partitions, including those a
 * concurrent delete started, and Partition.close closes its log whatever the snapshot does.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import type { FileHandle, Fs, OpenMode } from "../../src/platform/fs.ts";
import { nodeFs } from "../../src/platform/node-fs.ts";
import { simpleBatch } from "../support/batch-builder.ts";
import { errorCapturingLogger } from "../support/capturing-logger.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

/** nodeFs, remembering which paths have a handle open right now. */
class OpenHandleTrackingFs implements Fs {
  readonly openPaths = new Map<FileHandle, string>();
  constructor(private readonly inner: Fs) {}
  async open(path: string, mode: OpenMode): Promise<FileHandle> {
    const handle = await this.inner.open(path, mode);
    const tracked: FileHandle = {
      write: (data, position) => handle.write(data, position),
      read: (length, position) => handle.read(length, position),
      truncate: (length) => handle.truncate(length),
      fsync: () => handle.fsync(),
      size: () => handle.size(),
      close: async () => {
        this.openPaths.delete(tracked);
        await handle.close();
      },
    };
    this.openPaths.set(tracked, path);
    return tracked;
  }
  readFile = (path: string) => this.inner.readFile(path);
  rename = (from: string, to: string) => this.inner.rename(from, to);
  fsyncDir = (path: string) => this.inner.fsyncDir(path);
  mkdirp = (path: string) => this.inner.mkdirp(path);
  readdir = (path: string) => this.inner.readdir(path);
  unlink = (path: string) => this.inner.unlink(path);
  rmrf = (path: string) => this.inner.rmrf(path);
  stat = (path: string) => this.inner.stat(path);
}

const fs = new OpenHandleTrackingFs(nodeFs);
const { log, errors: handlerFailures } = errorCapturingLogger();
let broker: TestBroker;
let first: WireClient;
let second: WireClient;

beforeAll(async () => {
  broker = await startTestBroker({ autoCreateTopicsEnable: false }, { fs, log });
  first = await WireClient.connect(broker.port);
  second = await WireClient.connect(broker.port);
});
afterAll(async () => {
  first?.close();
  second?.close();
  await broker?.stop();
});

const TOPIC = "deleted-twice";
const segmentFilesOpen = () => [...fs.openPaths.values()].filter((p) => p.includes(`/${TOPIC}-`));

test("delete-topics-handle-leak: two DeleteTopics of one topic at once close every segment file and both are answered", async () => {
  for (let round = 0; round < 5; round++) {
    const created = await first.request(19, 4, {
      topics: [{ name: TOPIC, numPartitions: 2, replicationFactor: 1, assignments: [], configs: [] }],
      timeoutMs: 1000,
      validateOnly: false,
    });
    expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
    // Open both partitions: one by a produce (its close writes a producer-state snapshot), one by ListOffsets.
    const produced = await first.request(0, 9, {
      transactionalId: null,
      acks: -1,
      timeoutMs: 1000,
      topicData: [{ name: TOPIC, partitionData: [{ index: 0, records: simpleBatch(3) }] }],
    });
    expect(produced.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
    const listed = await first.request(2, 5, {
      replicaId: -1,
      isolationLevel: 0,
      topics: [{ name: TOPIC, partitions: [{ partitionIndex: 1, currentLeaderEpoch: -1, timestamp: -1 }] }],
    });
    expect(listed.topics[0].partitions[0].errorCode).toBe(ErrorCode.NONE);
    expect(segmentFilesOpen().length).toBeGreaterThan(0);

    const request = { topicNames: [TOPIC], timeoutMs: 1000 };
    const answers = await Promise.all([first.request(20, 4, request), second.request(20, 4, request)]);
    // Both deletes are answered: no file of the topic may still be open.
    expect(segmentFilesOpen()).toEqual([]);
    const codes = answers.map((a) => a.responses[0].errorCode as number).sort((a, b) => a - b);
    expect(codes).toEqual([ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION].sort((a, b) => a - b));
  }
  expect(handlerFailures).toEqual([]);
  // The topic can be created and used again afterwards (the deletes left no partition marked as deleting).
  const again = await first.request(19, 4, {
    topics: [{ name: TOPIC, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 1000,
    validateOnly: false,
  });
  expect(again.topics[0].errorCode).toBe(ErrorCode.NONE);
  const listed = await first.request(2, 5, {
    replicaId: -1,
    isolationLevel: 0,
    topics: [{ name: TOPIC, partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1 }] }],
  });
  expect(listed.topics[0].partitions[0].errorCode).toBe(ErrorCode.NONE);
});
