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
)

// version is the release, set by the release build with
// -ldflags "-X main.version=v0.2.0". go install records the module version
// in the binary itself, which the version command reads when this is empty.
var version string

func main() {
	// Ctrl-C ends watches cleanly (exit 130) instead of killing the process
	// mid-write.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := commands.Execute(ctx, genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, os.Args[1:], commands.Options{Version: version})
	stop()
	os.Exit(code)
}
