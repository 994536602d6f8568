package realnode

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// startRelay serves the kubernetes Service's ClusterIP on the bridge by
// relaying each connection to the API server on loopback: the one Service
// kube-proxy would have to serve for the manager's in-cluster config.
func (n *Node) startRelay() error {
	u, err := url.Parse(n.RESTConfig.Host)
	if err != nil {
		return fmt.Errorf("API server address %q: %w", n.RESTConfig.Host, err)
	}
	target := u.Host
	l, err := net.Listen("tcp", net.JoinHostPort(ServiceIP, strconv.Itoa(apiServerRelayPort)))
	if err != nil {
		return fmt.Errorf("serving the kubernetes Service on %s: %w", ServiceIP, err)
	}
	n.relay = l
	n.relayDone.Add(1)
	go func() {
		defer n.relayDone.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go relay(c, target)
		}
	}()
	return nil
}

func relay(c net.Conn, target string) {
	defer func() { _ = c.Close() }()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}
