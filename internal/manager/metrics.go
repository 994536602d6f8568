package manager

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// MetricsOptions configure the /metrics endpoint.
type MetricsOptions struct {
	// BindAddress serves /metrics; "" or "0" turns it off.
	BindAddress string
	// Insecure serves plain HTTP to anyone who reaches the port. By
	// default the endpoint speaks HTTPS and lets in only requests whose
	// bearer token the API server authenticates (TokenReview) and
	// authorizes for GET on the non-resource URL /metrics
	// (SubjectAccessReview): the ClusterRole stepwise-metrics-reader.
	Insecure bool
	// CertDir holds tls.crt and tls.key, reloaded when they change (a
	// cert-manager Certificate's Secret mounted there); empty, or without
	// those files, a self-signed certificate is made at start.
	CertDir string
	// EnableHTTP2 also offers HTTP/2. Off by default: HTTP/2 Rapid Reset
	// and stream cancellation attacks (CVE-2023-44487, CVE-2023-39325)
	// cost a server far more than HTTP/1.1, and a scrape gains nothing
	// from HTTP/2.
	EnableHTTP2 bool
}

func (o MetricsOptions) serverOptions() (metricsserver.Options, error) {
	addr := o.BindAddress
	if addr == "" {
		addr = "0"
	}
	opts := metricsserver.Options{BindAddress: addr}
	if o.Insecure {
		return opts, nil
	}
	opts.SecureServing = true
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	opts.CertDir = o.CertDir
	if !o.EnableHTTP2 {
		opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	return opts, nil
}
