package commands

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/internal/cli"
)

func newSetCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Change a CloneSet: set image",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("a subcommand is required: set image")
		},
	}
	cmd.AddCommand(newSetImageCommand(e))
	return cmd
}

func newSetImageCommand(e *env) *cobra.Command {
	var ignoreGitOps bool
	cmd := &cobra.Command{
		Use:   "image cloneset/NAME CONTAINER=IMAGE...",
		Short: "Change container images of a CloneSet, which kubectl set image cannot do",
		Long: "Change container images (init containers too) of a stepwise.dev CloneSet, for\n" +
			"clusters without GitOps: kubectl set image knows only built-in kinds. Only the\n" +
			"named images are written, each after checking that its container is still\n" +
			"where it was read. A Rollout that governs the CloneSet then rolls the new\n" +
			"template out in steps; without one, the CloneSet updates its Pods in place.\n\n" +
			"A CloneSet that Flux or Argo CD applies (their labels, annotations or field\n" +
			"managers say so) is refused: change the image in git, which would put the\n" +
			"old one back at its next sync. --ignore-gitops changes it anyway.",
		Example: "  kubectl stepwise set image cloneset/web app=registry.example.com/web:1.2.0 -n shop\n" +
			"  kubectl stepwise set image cloneset web app=registry.example.com/web:1.2.0 log=registry.example.com/log:3",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, rest, err := cloneSetName(args)
			if err != nil {
				return err
			}
			changes, err := cli.ParseImages(rest)
			if err != nil {
				return usagef("%v", err)
			}
			ns, dyn, err := e.namespacedClient()
			if err != nil {
				return err
			}
			res, err := cli.SetImage(cmd.Context(), dyn, ns, name, changes, ignoreGitOps)
			if err != nil {
				return err
			}
			var b strings.Builder
			if len(res.Changes) == 0 {
				fmt.Fprintf(&b, "cloneset %s/%s: unchanged, every container already runs its image\n", ns, name)
			}
			for _, c := range res.Changes {
				fmt.Fprintf(&b, "cloneset %s/%s: container %s: %s -> %s\n", ns, name, c.Container, c.From, c.To)
			}
			if res.Rollout != "" && len(res.Changes) > 0 {
				fmt.Fprintf(&b, "rollout %s/%s rolls it out in steps: kubectl stepwise get rollout %s -n %s --watch\n", ns, res.Rollout, res.Rollout, ns)
			}
			_, err = fmt.Fprint(e.streams.Out, b.String())
			return err
		},
	}
	cmd.Flags().BoolVar(&ignoreGitOps, "ignore-gitops", false, "Change a CloneSet that a GitOps tool applies; git puts its image back at its next sync.")
	return cmd
}

// cloneSetName accepts "cloneset/NAME" or "cloneset NAME" (and the plural,
// the short name clone, the group-qualified resource) before the images.
func cloneSetName(args []string) (name string, rest []string, err error) {
	if len(args) > 0 {
		if kind, n, ok := strings.Cut(args[0], "/"); ok {
			args = append([]string{kind, n}, args[1:]...)
		}
	}
	switch {
	case len(args) == 0:
		return "", nil, usagef("a CloneSet is required: set image cloneset/NAME CONTAINER=IMAGE")
	case !isCloneSetType(args[0]):
		return "", nil, usagef("resource type %q is not supported: only cloneset is (kubectl set image changes built-in kinds)", args[0])
	case len(args) == 1 || args[1] == "" || strings.Contains(args[1], "="):
		return "", nil, usagef("cloneset NAME is required: set image cloneset/NAME CONTAINER=IMAGE")
	}
	return args[1], args[2:], nil
}

func isCloneSetType(s string) bool {
	switch strings.ToLower(s) {
	case "cloneset", "clonesets", "clone", "cloneset.stepwise.dev", "clonesets.stepwise.dev":
		return true
	}
	return false
}
