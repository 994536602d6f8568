package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/internal/cli"
)

func newStatusCommand(e *env) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Wait until a rollout is Healthy (exit 0) or Aborted (exit 1), for CI",
		Long: "Wait until a rollout is Healthy for its current generation and its workload's\n" +
			"current revision (exit 0) or Aborted (exit 1, with the controller's message).\n" +
			"After --timeout, exit 2. Other errors exit 1 too. A line is printed whenever\n" +
			"the phase, the step or the reason changes. The rollout and its workload are\n" +
			"watched, not polled.",
		Example:           "  kubectl apply -f cloneset.yaml && kubectl stepwise status web -n shop --timeout 30m",
		Args:              oneName("rollout"),
		ValidArgsFunction: e.completeRollouts,
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return usagef("--timeout: %s is negative: give a duration such as 10m, or 0 to wait without limit", timeout)
			}
			ns, dyn, err := e.namespacedClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			waitCtx, cancel := ctx, context.CancelFunc(func() {})
			if timeout > 0 {
				waitCtx, cancel = context.WithTimeout(ctx, timeout)
			}
			defer cancel()

			v, err := cli.Wait(waitCtx, dyn, ns, args[0], e.streams.Out)
			switch {
			case err != nil && ctx.Err() == nil && errors.Is(waitCtx.Err(), context.DeadlineExceeded):
				last := v.Summary
				if last == "" {
					// The first read never answered.
					last = err.Error()
				}
				return &exitError{code: ExitTimeout, err: fmt.Errorf("timed out after %s waiting for rollout %s/%s: %s", timeout, ns, args[0], last)}
			case err != nil:
				return err
			case v.Outcome == cli.Failed:
				return &exitError{code: ExitError, err: fmt.Errorf("rollout %s/%s: %s", ns, args[0], v.Summary)}
			case v.Outcome == cli.Deleted:
				return &exitError{code: ExitError, err: fmt.Errorf("rollout %s/%s was deleted while waiting", ns, args[0])}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "How long to wait; 0 waits without limit.")
	return cmd
}
