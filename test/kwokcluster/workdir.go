package kwokcluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func randomName() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("naming cluster: %w", err)
	}
	return "sw-" + hex.EncodeToString(b), nil
}

// prepareWorkdir writes the kubectl stand-in and our kwokctl configuration,
// and the environment kwokctl runs with. It returns the configuration path.
func (c *Cluster) prepareWorkdir() (string, error) {
	shimDir := filepath.Join(c.Workdir, "shim")
	if err := os.MkdirAll(shimDir, 0o755); err != nil {
		return "", fmt.Errorf("creating kubectl stand-in dir: %w", err)
	}
	kubectl := filepath.Join(shimDir, "kubectl")
	if err := os.WriteFile(kubectl, []byte(kubectlStandIn), 0o755); err != nil {
		return "", fmt.Errorf("writing kubectl stand-in: %w", err)
	}
	configPath := filepath.Join(c.Workdir, "kwokctl.yaml")
	config := fmt.Appendf(nil, kwokctlConfigTemplate, kubectl)
	if len(c.opts.APIServerCertSANs) > 0 {
		config = append(config, "  kubeApiserverCertSANs:\n"...)
		for _, san := range c.opts.APIServerCertSANs {
			config = fmt.Appendf(config, "  - %q\n", san)
		}
	}
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return "", fmt.Errorf("writing kwokctl configuration: %w", err)
	}

	env := []string{
		"KWOK_WORKDIR=" + c.Workdir,
		"PATH=" + shimDir + string(os.PathListSeparator) + os.Getenv("PATH"),
		// A tripwire: should kwokctl ever try to download, it fails at once
		// instead of hanging on a network that is not there. Loopback is
		// never proxied.
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9",
		"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9",
	}
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(key, "KWOK_"), key == "PATH", strings.EqualFold(key, "HTTP_PROXY"),
			strings.EqualFold(key, "HTTPS_PROXY"), strings.EqualFold(key, "NO_PROXY"):
			// Ours win; inherited KWOK_* settings would change the cluster.
		default:
			env = append(env, kv)
		}
	}
	c.env = env
	return configPath, nil
}
