// Zombie fencing with franz-go, for tests/interop/transactions-clients.test.ts, and one transaction decided
// across a broker crash, for tests/fault/endtxn-answered-crash.test.ts (decide).
//
//	txn-zombie zombie BOOTSTRAP TOPIC TXN_ID PREFIX N LATE_PARTITION
//	txn-zombie batches BOOTSTRAP TOPIC TXN_ID PREFIX PARTITIONS TXNS PER_TXN
//	txn-zombie decide BOOTSTRAP TOPIC TXN_ID PREFIX PARTITIONS N commit|abort
//
// Every record has key "<prefix>-<txn>-<i>" and the same value.
//
// zombie: InitProducerId, BeginTransaction, N records to partition 0 (acknowledged), prints OPEN and waits for a
// line on stdin (EOF: exits 3, the test is gone). Then, as the zombie it has become meanwhile, sends
// "<prefix>-0-late" to LATE_PARTITION, commits (EndTransaction TryCommit), and aborts (TryAbort) if anything
// failed. Each step's outcome is one line: SENT <partition> <offset> | COMMITTED 0 | ABORTED 0 | EXCEPTION
// <step> <error>, where <error> is "kerr=<name> code=<code> retriable=<bool> <message>" for a broker's error
// code (kerr.Error), "local <message>" for anything else.
//
// batches: InitProducerId, then TXNS transactions of PER_TXN records (record i to partition i % PARTITIONS),
// each committed: COMMITTED <t>.
//
// decide: InitProducerId, one transaction of N records (record i to partition i % PARTITIONS), then commits
// or aborts at once (EndTransaction TryCommit / TryAbort): COMMITTED 0 / ABORTED 0 as soon as it returned.
// No group offsets: franz-go commits offsets in a transaction only from a GroupTransactSession's consumer.
//
// All print READY after InitProducerId and DONE at the end; an unexpected error prints FAILED <error>, exits 1.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"bunka.test/interop/internal/txnclient"
)

func say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func failed(format string, args ...any) {
	say("FAILED "+format, args...)
	os.Exit(1)
}

// describe: the broker's error code as franz-go classifies it, or the client's own error.
func describe(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Sprintf("kerr=%s code=%d retriable=%t %v", ke.Message, ke.Code, ke.Retriable, err)
	}
	return fmt.Sprintf("local %v", err)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		failed("bad number %q", s)
	}
	return n
}

func main() {
	if len(os.Args) < 6 {
		fmt.Fprintln(os.Stderr, "usage: txn-zombie zombie|batches|decide BOOTSTRAP TOPIC TXN_ID PREFIX ...")
		os.Exit(64)
	}
	mode, bootstrap, topic, txnID, prefix, rest := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6:]
	key := func(txn any, i any) []byte { return []byte(fmt.Sprintf("%s-%v-%v", prefix, txn, i)) }
	record := func(txn any, i any, partition int) *kgo.Record {
		k := key(txn, i)
		return &kgo.Record{Topic: topic, Partition: int32(partition), Key: k, Value: k}
	}

	opts := append(txnclient.Opts(bootstrap, txnID), kgo.RecordRetries(5))
	if os.Getenv("TXN_ZOMBIE_DEBUG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		failed("client: %v", err)
	}
	defer cl.Close()
	ctx := context.Background()
	// InitProducerId now: for B, this is what fences A.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		failed("InitProducerId: %s", describe(err))
	}
	say("READY")

	// produceTxn begins transaction t and writes n records to it (record i to partition i % partitions),
	// every one acknowledged.
	produceTxn := func(t, partitions, n int) {
		if err := cl.BeginTransaction(); err != nil {
			failed("begin: %s", describe(err))
		}
		records := make([]*kgo.Record, 0, n)
		for i := 0; i < n; i++ {
			records = append(records, record(t, i, i%partitions))
		}
		if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
			failed("produce: %s", describe(err))
		}
	}

	switch mode {
	case "zombie":
		if len(rest) != 2 {
			failed("zombie needs N LATE_PARTITION")
		}
		n, latePartition := atoi(rest[0]), atoi(rest[1])
		if err := cl.BeginTransaction(); err != nil {
			failed("begin: %s", describe(err))
		}
		records := make([]*kgo.Record, 0, n)
		for i := 0; i < n; i++ {
			records = append(records, record(0, i, 0))
		}
		if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
			failed("first records: %s", describe(err))
		}
		say("OPEN")
		if !bufio.NewScanner(os.Stdin).Scan() {
			os.Exit(3)
		}
		bad := false
		if r, err := cl.ProduceSync(ctx, record(0, "late", latePartition)).First(); err != nil {
			bad = true
			say("EXCEPTION send %s", describe(err))
		} else {
			say("SENT %d %d", r.Partition, r.Offset)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			bad = true
			say("EXCEPTION commit %s", describe(err))
		} else {
			say("COMMITTED 0")
		}
		if bad {
			if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
				say("EXCEPTION abort %s", describe(err))
			} else {
				say("ABORTED 0")
			}
		}
	case "batches":
		if len(rest) != 3 {
			failed("batches needs PARTITIONS TXNS PER_TXN")
		}
		partitions, txns, perTxn := atoi(rest[0]), atoi(rest[1]), atoi(rest[2])
		for t := 0; t < txns; t++ {
			produceTxn(t, partitions, perTxn)
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				failed("commit: %s", describe(err))
			}
			say("COMMITTED %d", t)
		}
	case "decide":
		if len(rest) != 3 || (rest[2] != "commit" && rest[2] != "abort") {
			failed("decide needs PARTITIONS N commit|abort")
		}
		produceTxn(0, atoi(rest[0]), atoi(rest[1]))
		if rest[2] == "commit" {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				failed("commit: %s", describe(err))
			}
			say("COMMITTED 0")
		} else {
			if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
				failed("abort: %s", describe(err))
			}
			say("ABORTED 0")
		}
	default:
		failed("unknown mode %s", mode)
	}
	say("DONE")
}
