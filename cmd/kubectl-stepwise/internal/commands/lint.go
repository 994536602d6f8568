package commands

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/stepanalysis"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

func newLintCommand(e *env) *cobra.Command {
	var filenames []string
	cmd := &cobra.Command{
		Use:   "lint -f FILE...",
		Short: "Check Rollout and CloneSet files offline, as the API server and the controller would",
		Long: "Check the Rollouts and CloneSets of files (several documents each; - for\n" +
			"stdin) without a cluster: each against the CRD shipped in this binary, as the\n" +
			"API server would on kubectl apply (unknown fields, types, enums, CEL rules,\n" +
			"with its message), each Rollout's analysis queries as the controller checks\n" +
			"them (templates rendered, PromQL parsed), and a Rollout whose CloneSet is in\n" +
			"the files against it (spec.versionPolicy.container). Other documents are\n" +
			"skipped. Exit 1 when an object is invalid or there is none.",
		Example: "  kubectl stepwise lint -f deploy/web/cloneset.yaml -f deploy/web/rollout.yaml\n" +
			"  kustomize build deploy/web | kubectl stepwise lint -f -",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(filenames) == 0 {
				return usagef("-f is required: the files to check")
			}
			var files []cli.ManifestFile
			for _, name := range filenames {
				if name == "-" {
					files = append(files, cli.ManifestFile{Source: "-", Data: e.streams.In})
					continue
				}
				f, err := os.Open(name)
				if err != nil {
					return fmt.Errorf("-f: %w", err)
				}
				defer func() { _ = f.Close() }()
				files = append(files, cli.ManifestFile{Source: name, Data: f})
			}
			report, err := cli.Lint(cmd.Context(), files, cli.LintOptions{
				CheckRollout: func(r *stepwisev1.Rollout) error { return stepanalysis.Validate(&r.Spec) },
			})
			if err != nil {
				return err
			}
			if err := cli.WriteLintReport(e.streams.Out, report); err != nil {
				return err
			}
			switch {
			case len(report.Findings) == 0:
				return errors.New("no Rollout or CloneSet of " + stepwisev1.GroupVersion.String() + " in the files")
			case report.Invalid() > 0:
				return fmt.Errorf("%d of %d objects are invalid", report.Invalid(), len(report.Findings))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&filenames, "filename", "f", nil, "A file of Rollouts and CloneSets (YAML or JSON); - reads stdin. Repeatable.")
	return cmd
}
