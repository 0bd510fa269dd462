// Command rrgo: request-reply and a plain send with Apache's Go client (rocketmq-client-go v2),
// for tests/interop/test_request_reply.py.
//
//	rrgo -namesrv HOST:PORT -topic T -count N
//
// First one plain send ({"send": true, "msgId", "transactionId"}), then one JSON line per request
// ({"i", "ok", "body", "correlation", "error"}); exit 1 if anything failed. The Go client sends its
// first heartbeat (which registers the producer whose channel the broker pushes replies to) 1 s
// after Start, to the brokers it knows by then: the plain send comes first, then a pause.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func main() {
	namesrv := flag.String("namesrv", "", "name server address")
	topic := flag.String("topic", "", "request topic")
	count := flag.Int("count", 3, "requests")
	flag.Parse()
	rlog.SetLogLevel("error")
	out := json.NewEncoder(os.Stdout)
	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{*namesrv}),
		producer.WithGroupName("RR_GO_REQUESTER"), producer.WithRetry(2))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := p.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer p.Shutdown()
	r, err := p.SendSync(context.Background(), primitive.NewMessage(*topic, []byte("plain")))
	if err != nil {
		_ = out.Encode(map[string]interface{}{"send": false, "error": err.Error()})
		os.Exit(1)
	}
	_ = out.Encode(map[string]interface{}{"send": true, "msgId": r.MsgID, "transactionId": r.TransactionID})
	time.Sleep(2 * time.Second)
	failed := false
	for i := 0; i < *count; i++ {
		line := map[string]interface{}{"i": i}
		msg := primitive.NewMessage(*topic, []byte(fmt.Sprintf("req-%d", i)))
		reply, err := p.Request(context.Background(), 10*time.Second, msg)
		if err != nil {
			failed = true
			line["ok"], line["error"] = false, err.Error()
		} else {
			line["ok"], line["body"] = true, string(reply.Body)
			line["correlation"] = reply.GetProperty(primitive.PropertyCorrelationID)
		}
		_ = out.Encode(line)
	}
	if failed {
		os.Exit(1)
	}
}
