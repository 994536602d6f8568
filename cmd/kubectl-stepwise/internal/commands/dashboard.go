package commands

import (
	"context"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/internal/cli"
	"github.com/stepwise-dev/stepwise/internal/dashboard"
)

func newDashboardCommand(e *env) *cobra.Command {
	var (
		port          int
		allNamespaces bool
		open          bool
	)
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a live web dashboard of rollouts on 127.0.0.1",
		Long: "Serve a live web dashboard of rollouts on 127.0.0.1: the list of rollouts, and\n" +
			"for each its steps, Pods, measurements charted against their thresholds and\n" +
			"Events, with promote, abort, retry, pause and resume buttons that write the\n" +
			"same annotations as the commands of the same name. Changes are pushed to the\n" +
			"page from watches. It uses the kubeconfig's credentials and nothing more: it\n" +
			"shows what they may read, and its buttons can do what they may patch.\n\n" +
			"The server listens on 127.0.0.1 only. The URL printed carries a session token\n" +
			"that the page swaps for a cookie; writes also need the token in a header and\n" +
			"the page's own origin, so other sites open in the browser cannot use it.",
		Example: "  kubectl stepwise dashboard -n shop --open\n" +
			"  kubectl stepwise dashboard --all-namespaces --port 8765",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("dashboard takes no arguments, got %v", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 0 || port > 65535 {
				return usagef("--port: %d is not a port number (0 picks a free port)", port)
			}
			if allNamespaces && cmd.Flags().Changed("namespace") {
				return usagef("--all-namespaces and --namespace cannot be combined")
			}
			namespace := ""
			if !allNamespaces {
				ns, err := e.namespace()
				if err != nil {
					return err
				}
				namespace = ns
			}
			dyn, kube, err := e.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			hub := dashboard.NewHub(dyn, kube, namespace)
			if err := hub.Start(ctx); err != nil {
				return err
			}
			l, port, err := dashboard.Listen(port)
			if err != nil {
				return err
			}
			srv, err := dashboard.NewServer(hub, dashboard.RequestFunc(dyn), port, e.now)
			if err != nil {
				_ = l.Close()
				return err
			}
			scope := "namespace " + namespace
			if namespace == "" {
				scope = "all namespaces"
			}
			if _, err := fmt.Fprintf(e.streams.Out, "Dashboard of %s: %s\nPress Ctrl-C to stop.\n", scope, srv.URL()); err != nil {
				_ = l.Close()
				return err
			}
			if open {
				page, err := openBrowser(srv.URL())
				if page != "" {
					// The page holds the session token: it goes when the
					// dashboard stops, however it stops (Ctrl-C and SIGTERM
					// end ctx, an error returns), not before, since the
					// browser may read it late.
					defer func() { _ = os.Remove(page) }()
				}
				if err != nil {
					_, _ = fmt.Fprintf(e.streams.ErrOut, "could not open a browser (%v): open the URL above\n", err)
				}
			}
			err = srv.Serve(ctx, l)
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				// Ctrl-C is how a dashboard ends: not an error.
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&port, "port", 0, "Port on 127.0.0.1 to listen on; 0 picks a free one, printed at start.")
	f.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Show rollouts of every namespace (needs cluster-wide list and watch rights).")
	f.BoolVar(&open, "open", false, "Open the dashboard in the default browser.")
	return cmd
}

// clients are the dynamic client (Rollouts and workloads, as every command
// uses) and a typed one for Pods and Events.
func (e *env) clients() (dynamic.Interface, kubernetes.Interface, error) {
	cfg, err := e.config.ToRESTConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = cli.FieldManager
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a client for %s: %w", cfg.Host, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a client for %s: %w", cfg.Host, err)
	}
	return dyn, kube, nil
}

// openBrowser hands the desktop's opener a file, readable by this user
// only, that redirects to the URL: the session token would be visible to
// every user of the machine in the opener's command line. It returns the
// file's path, for the caller to remove when the dashboard stops; "" when
// there is none (not written, or removed already because no opener took
// it). The dashboard runs whether or not this works.
func openBrowser(url string) (string, error) {
	f, err := os.CreateTemp("", "stepwise-dashboard-*.html")
	if err != nil {
		return "", err
	}
	page := `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=` + html.EscapeString(url) + `"><title>Stepwise</title>`
	_, err = f.WriteString(page)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = launch("file://" + filepath.ToSlash(f.Name()))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// launch starts the desktop's opener on target, without waiting for it.
func launch(target string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", target)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", target)
	default:
		cmd = exec.Command("xdg-open", target)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
