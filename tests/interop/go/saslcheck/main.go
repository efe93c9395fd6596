// saslcheck: franz-go over SASL_PLAINTEXT. Produces COUNT records to TOPIC (idempotent, acks=all), then
// consumes them in a group, authenticating with MECHANISM (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) as USER.
//
//	saslcheck BOOTSTRAP TOPIC COUNT MECHANISM USER PASSWORD
//
// Prints one JSON object: {"produced": N, "consumed": N, "error": "..."} and exits 0 when it ran (the
// caller judges the result); with a wrong password "error" holds franz-go's authentication error.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type result struct {
	Produced int    `json:"produced"`
	Consumed int    `json:"consumed"`
	Error    string `json:"error"`
}

func mechanism(name, user, password string) (sasl.Mechanism, error) {
	switch name {
	case "PLAIN":
		return plain.Auth{User: user, Pass: password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("unknown mechanism %s", name)
}

func main() {
	if len(os.Args) != 7 {
		fmt.Fprintln(os.Stderr, "usage: saslcheck BOOTSTRAP TOPIC COUNT MECHANISM USER PASSWORD")
		os.Exit(2)
	}
	bootstrap, topic, mech, user, password := os.Args[1], os.Args[2], os.Args[4], os.Args[5], os.Args[6]
	count, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	m, err := mechanism(mech, user, password)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := result{}
	defer func() {
		line, _ := json.Marshal(out)
		fmt.Println(string(line))
	}()

	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.SASL(m), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(3))
	if err != nil {
		out.Error = err.Error()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < count; i++ {
		r := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(fmt.Sprintf("franz-value-%d", i))})
		if err := r.FirstErr(); err != nil {
			out.Error = err.Error()
			producer.Close()
			return
		}
		out.Produced++
	}
	producer.Close()

	consumer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.SASL(m), kgo.ConsumerGroup(topic+"-group"), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		out.Error = err.Error()
		return
	}
	defer consumer.Close()
	for out.Consumed < count && ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		for _, e := range fetches.Errors() {
			if ctx.Err() == nil {
				out.Error = e.Err.Error()
				return
			}
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == fmt.Sprintf("franz-value-%d", out.Consumed) {
				out.Consumed++
			}
		})
	}
	if err := consumer.CommitUncommittedOffsets(context.Background()); err != nil && out.Error == "" {
		out.Error = err.Error()
	}
}
