// Command kubectl-stepwise is the kubectl plugin of Stepwise: `kubectl
// stepwise get rollout web`, `kubectl stepwise promote web`, and so on.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/stepwise-dev/stepwise/cmd/kubectl-stepwise/internal/commands"
	"github.com/stepwise-dev/stepwise/internal/version"
)

func main() {
	// Ctrl-C ends watches cleanly (exit 130) instead of killing the process
	// mid-write.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := commands.Execute(ctx, genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, os.Args[1:], commands.Options{Version: version.Version})
	stop()
	os.Exit(code)
}
