// Package commands is kubectl-stepwise's command line: cobra commands that
// parse flags and call package cli. Nothing here is global, so that tests
// run the whole command line in-process, many times over.
package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"

	"github.com/stepwise-dev/stepwise/internal/cli"
)

// Exit codes. status documents 1 and 2 for CI pipelines; every other
// command uses 1 for any error, as kubectl does.
const (
	ExitOK          = 0
	ExitError       = 1
	ExitTimeout     = 2
	ExitInterrupted = 130
)

// Options are what a test replaces; the zero value is the real world.
type Options struct {
	// Now is the clock of timestamps and of the view's ages.
	Now func() time.Time
	// Getenv reads NO_COLOR and TERM.
	Getenv func(string) string
	// Version is the plugin's release as the build linked it into main
	// (-ldflags "-X github.com/stepwise-dev/stepwise/internal/version.Version=v0.2.0", internal/version); empty, the version go install
	// recorded in the binary is used.
	Version string
}

// Execute runs the command line args and returns the exit code. Errors are
// printed to streams.ErrOut in kubectl's "error: ..." form.
func Execute(ctx context.Context, streams genericiooptions.IOStreams, args []string, opts Options) int {
	root := NewRootCommand(streams, opts)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitError
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		_, _ = fmt.Fprintln(streams.ErrOut, "interrupted")
		return ExitInterrupted
	}
	_, _ = fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
	if errors.As(err, new(*usageError)) {
		cmd, _, findErr := root.Find(args)
		if findErr != nil || cmd == nil {
			cmd = root
		}
		_, _ = fmt.Fprintf(streams.ErrOut, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// exitError carries an exit code other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError is a mistake in the command line, worth a pointer to --help.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

// env is what every command shares: the streams, the kubeconfig flags and
// the replaceable parts of the world.
type env struct {
	streams genericiooptions.IOStreams
	config  *genericclioptions.ConfigFlags
	now     func() time.Time
	getenv  func(string) string
	version string
}

// NewRootCommand builds the command tree; each call builds a new one.
func NewRootCommand(streams genericiooptions.IOStreams, opts Options) *cobra.Command {
	e := &env{
		streams: streams,
		config:  genericclioptions.NewConfigFlags(true),
		now:     opts.Now,
		getenv:  opts.Getenv,
		version: opts.Version,
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.getenv == nil {
		e.getenv = os.Getenv
	}
	root := &cobra.Command{
		Use:   "kubectl-stepwise",
		Short: "Watch and steer Stepwise rollouts",
		Long: "Watch and steer Stepwise rollouts: list them, show one, ask the controller to\n" +
			"promote, abort, retry, pause or resume it, wait for it in CI, undo it, change\n" +
			"a CloneSet's image, and plan a new rollout or lint one offline.",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl stepwise"},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	e.config.AddFlags(root.PersistentFlags())

	root.AddCommand(newGetCommand(e), newListCommand(e), newStatusCommand(e), newPlanCommand(e), newLintCommand(e))
	root.AddCommand(newSetCommand(e), newUndoCommand(e), newDashboardCommand(e), newVersionCommand(e))
	for _, a := range cli.Actions() {
		root.AddCommand(newActionCommand(e, a))
	}
	initHelpFlags(root)
	return root
}

// initHelpFlags defines --help up front. cobra defines it only when a
// command runs, after it has looked the command up; until then it takes
// "--help" for a flag with a value, so "--help --kubeconfig x" would read
// "x" as a command name.
func initHelpFlags(c *cobra.Command) {
	c.InitDefaultHelpFlag()
	for _, sub := range c.Commands() {
		initHelpFlags(sub)
	}
}

// dynamic is the client of every command. The User-Agent names the plugin
// in audit logs.
func (e *env) dynamic() (dynamic.Interface, error) {
	cfg, err := e.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = cli.FieldManager
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", cfg.Host, err)
	}
	return dyn, nil
}

// namespace is -n, or the kubeconfig context's namespace, or "default".
func (e *env) namespace() (string, error) {
	ns, _, err := e.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from kubeconfig: %w", err)
	}
	return ns, nil
}

// namespacedClient is the namespace a command acts in and a client to act
// with, from kubeconfig and the flags.
func (e *env) namespacedClient() (string, dynamic.Interface, error) {
	ns, err := e.namespace()
	if err != nil {
		return "", nil, err
	}
	dyn, err := e.dynamic()
	if err != nil {
		return "", nil, err
	}
	return ns, dyn, nil
}

// addOutputFlag registers -o; check validates it before any API call.
func addOutputFlag(cmd *cobra.Command, into *string, def string) {
	cmd.Flags().StringVarP(into, "output", "o", def, "Output format: yaml or json.")
}

func checkOutput(format string, allowEmpty bool) error {
	switch format {
	case "yaml", "json":
		return nil
	case "":
		if allowEmpty {
			return nil
		}
	}
	return usagef("-o: %q is not supported: use yaml or json", format)
}

// oneName checks the NAME argument of commands that take one Rollout.
func oneName(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usagef("%s NAME is required", what)
		case len(args) > 1:
			return usagef("one %s NAME is expected, got %s", what, strings.Join(args, " "))
		}
		return nil
	}
}

// noArgs refuses arguments as a usage error, with the pointer to --help.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %s", cmd.CommandPath(), strings.Join(args, " "))
	}
	return nil
}
