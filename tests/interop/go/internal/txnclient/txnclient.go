// Package txnclient holds what the franz-go interop helpers share: the options of a transactional client as
// the tests use it.
package txnclient

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Opts: a transactional producer with transactional id txnID (also its client id) that writes each record
// to the partition the record names, with the transaction timeout the other clients' helpers use.
func Opts(bootstrap, txnID string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID(txnID),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(60 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}
}
