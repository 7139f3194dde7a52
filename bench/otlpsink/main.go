// Command otlpsink is an OTLP/HTTP trace receiver for benchmarks: it decodes every
// export (go.opentelemetry.io/proto/otlp), counts the spans and answers as a collector
// would, keeping nothing. On SIGTERM or SIGINT it prints
//
//	otlpsink exports=N spans=M bad=K
//
// and exits. bench/tracing.sh points slogate's exporter at it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4318", "address to serve OTLP/HTTP on")
	flag.Parse()
	var exports, spans, bad atomic.Int64
	ok, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			bad.Add(1)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n := 0
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
		exports.Add(1)
		spans.Add(int64(n))
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(ok)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	srv := &http.Server{Addr: *listen, Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Fatal(err)
	}
	fmt.Printf("otlpsink exports=%d spans=%d bad=%d\n", exports.Load(), spans.Load(), bad.Load())
}
