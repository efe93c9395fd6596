// A consume-transform-produce copier with franz-go, exactly once: a kgo.GroupTransactSession (a consumer in
// GROUP reading read_committed with require_stable offsets, and a transactional producer whose End commits
// the consumed offsets in the transaction: AddOffsetsToTxn, TxnOffsetCommit with the group's generation,
// EndTxn). Each poll of at most TXN_SIZE records becomes one transaction: every record of input partition p
// goes to output partition p with the same key and the value upper-cased.
//
//	eos-copier BOOTSTRAP INPUT OUTPUT GROUP TXN_ID INSTANCE_ID TXN_SIZE PAUSE_AT PAUSE_STAGE
//
// INSTANCE_ID is the static member id, "-" for none. PAUSE_AT > 0 stops transaction number PAUSE_AT of this
// run for good in the middle (PAUSE_STAGE "sent": its records are acknowledged by the broker; "offsets": its
// TxnOffsetCommit is answered too, and EndTxn never goes out), after printing PAUSED, so that the test can
// SIGKILL it with a transaction open. It never exits by itself. stdout, one line per event: READY, COMMIT
// <n> <records in this run>, PAUSED <n>, ABORT <n> <error>; a fatal error prints FATAL and exits 2.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"bunka.test/interop/internal/txnclient"
)

const txnOffsetCommitKey = 28

func say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func fatal(format string, args ...any) {
	say("FATAL "+format, args...)
	os.Exit(2)
}

// pauseAfterOffsets stops the client inside transaction n once its TxnOffsetCommit has been answered: the hook
// runs on the connection's reader after the response is read, and never returns, so End never sends EndTxn.
type pauseAfterOffsets struct{ txn atomic.Int64 }

func (h *pauseAfterOffsets) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	n := h.txn.Load()
	if key != txnOffsetCommitKey || n == 0 || e2e.Err() != nil {
		return
	}
	say("PAUSED %d", n)
	select {}
}

// fenced: errors after which this producer can never commit again (a newer instance took the transactional id).
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

func main() {
	if len(os.Args) != 10 {
		fmt.Fprintln(os.Stderr, "usage: eos-copier BOOTSTRAP INPUT OUTPUT GROUP TXN_ID INSTANCE_ID TXN_SIZE PAUSE_AT PAUSE_STAGE")
		os.Exit(64)
	}
	bootstrap, input, output, group, txnID, instanceID := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6]
	txnSize, err1 := strconv.Atoi(os.Args[7])
	pauseAt, err2 := strconv.Atoi(os.Args[8])
	pauseStage := os.Args[9]
	if err := errors.Join(err1, err2); err != nil {
		fatal("bad arguments: %v", err)
	}

	hook := &pauseAfterOffsets{}
	opts := append(txnclient.Opts(bootstrap, txnID),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.WithHooks(hook),
	)
	if instanceID != "-" {
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		fatal("client: %v", err)
	}
	ctx := context.Background()
	// InitProducerId now rather than at the first produce: it fences the previous run (same transactional id)
	// and aborts its open transaction before anything is read, as the other copiers' initTransactions does.
	if _, _, err := sess.Client().ProducerID(ctx); err != nil {
		fatal("InitProducerId: %v", err)
	}
	say("READY")

	txns, copied := 0, 0
	for {
		fetches := sess.PollRecords(ctx, txnSize)
		fetches.EachError(func(topic string, partition int32, err error) {
			say("ABORT %d fetch %s-%d: %v", txns+1, topic, partition, err)
		})
		records := fetches.Records()
		if len(records) == 0 {
			continue
		}
		n := txns + 1
		if err := sess.Begin(); err != nil {
			fatal("begin: %v", err)
		}
		out := make([]*kgo.Record, 0, len(records))
		for _, r := range records {
			out = append(out, &kgo.Record{Topic: output, Partition: r.Partition, Key: r.Key, Value: bytes.ToUpper(r.Value)})
		}
		if err := sess.ProduceSync(ctx, out...).FirstErr(); err != nil {
			if fenced(err) {
				fatal("produce: %v", err)
			}
			say("ABORT %d produce: %v", n, err)
			if _, err := sess.End(ctx, kgo.TryAbort); err != nil {
				fatal("abort: %v", err)
			}
			continue
		}
		if n == pauseAt && pauseStage == "sent" {
			say("PAUSED %d", n)
			select {}
		}
		if n == pauseAt && pauseStage == "offsets" {
			hook.txn.Store(int64(n))
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			if fenced(err) {
				fatal("end: %v", err)
			}
			say("ABORT %d end: %v", n, err)
			continue
		}
		if !committed {
			// The session aborted it (a rebalance revoked partitions meanwhile) and rewound to the committed offsets.
			say("ABORT %d aborted by the session (rebalance)", n)
			continue
		}
		txns = n
		copied += len(records)
		say("COMMIT %d %d", txns, copied)
	}
}
