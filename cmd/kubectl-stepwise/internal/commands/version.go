package commands

import (
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/internal/cli"
)

func newVersionCommand(e *env) *cobra.Command {
	var (
		clientOnly bool
		namespace  string
	)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the manager's",
		Long: "Print the plugin's version (the release it was built from, and the commit when\n" +
			"the build recorded it) and the version of each Stepwise manager in the cluster:\n" +
			"the Deployment labelled " + cli.ManagerSelector + ",\n" +
			"its app.kubernetes.io/version label (the Helm chart sets it), else its image's\n" +
			"tag. Every namespace is searched, or " + cli.DefaultManagerNamespace + " when listing them all is\n" +
			"forbidden. With --client, the cluster is not asked.",
		Example: "  kubectl stepwise version\n  kubectl stepwise version --client",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, _ := debug.ReadBuildInfo()
			plugin := cli.PluginBuild(e.version, info)
			if clientOnly {
				return cli.WriteVersions(e.streams.Out, plugin, nil, "")
			}
			dyn, err := e.dynamic()
			if err == nil {
				var managers []cli.Manager
				managers, err = cli.FindManagers(cmd.Context(), dyn, namespace)
				if err == nil {
					return cli.WriteVersions(e.streams.Out, plugin, managers, namespace)
				}
			}
			// The plugin's own version is worth printing even when the
			// cluster cannot be asked, as kubectl version does.
			if werr := cli.WriteVersions(e.streams.Out, plugin, nil, ""); werr != nil {
				return werr
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Print the plugin's version only; do not ask the cluster.")
	cmd.Flags().StringVar(&namespace, "manager-namespace", "", "Look for the manager in this namespace only (default: every namespace).")
	return cmd
}
