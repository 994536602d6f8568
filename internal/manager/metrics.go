package manager

import (
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// MetricsOptions configure the /metrics endpoint.
type MetricsOptions struct {
	// BindAddress serves /metrics in plain HTTP; "" or "0" turns it off.
	BindAddress string
}

func (o MetricsOptions) serverOptions() (metricsserver.Options, error) {
	addr := o.BindAddress
	if addr == "" {
		addr = "0"
	}
	return metricsserver.Options{BindAddress: addr}, nil
}
