package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemotel"
)

// telemetry is the service's OpenTelemetry layer, exported to Prometheus.
type telemetry struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	inst     *idemotel.Instrumentation
}

func newTelemetry() (*telemetry, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	inst, err := idemotel.New(idemotel.WithMeterProvider(mp))
	if err != nil {
		return nil, err
	}
	return &telemetry{registry: reg, provider: mp, inst: inst}, nil
}

// serveOps serves /metrics and the admin handler under /idem/ on addr
// until stop is called. A real service puts the admin handler behind its
// own operator authentication; this one listens on loopback only.
func serveOps(addr string, c *idem.Client, tel *telemetry, log *slog.Logger) (url string, stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(tel.registry, promhttp.HandlerOpts{}))
	mux.Handle("/idem/", http.StripPrefix("/idem", admin.NewHandler(c)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("ops listener: %w", err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("ops server", "err", err)
		}
	}()
	url = "http://" + ln.Addr().String()
	log.Info("ops endpoints", "metrics", url+"/metrics", "admin", url+"/idem/stats")
	return url, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
	}, nil
}
