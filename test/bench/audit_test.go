package bench

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/test/compare"
)

// countWrites counts in the audit log and in the files it was rotated to.
func countWrites(b *testing.B, auditLog, agent string, from, to time.Time) compare.Writes {
	total := compare.Writes{}
	eachAuditFile(b, auditLog, func(f io.Reader) error {
		w, err := compare.CountWrites(f, agent, from, to)
		for k, n := range w {
			total[k] += n
		}
		return err
	})
	return total
}

// eachAuditFile calls read with the files the audit log was rotated to,
// oldest first, then with the log itself: the API server starts a new file
// every 100 MB (its default), as the 5800-Pod scale run showed by counting
// 0.58 writes per Pod.
func eachAuditFile(b *testing.B, auditLog string, read func(io.Reader) error) {
	ext := filepath.Ext(auditLog)
	rotated, err := filepath.Glob(strings.TrimSuffix(auditLog, ext) + "-*" + ext)
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range append(rotated, auditLog) {
		f, err := os.Open(path)
		if err != nil {
			b.Fatalf("opening the audit log: %v", err)
		}
		err = read(f)
		_ = f.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// logWriters shows every writer the audit log saw, so that a controller
// whose agent is not the one expected shows up as zero writes plus a name.
func logWriters(b *testing.B, auditLog string) {
	f, err := os.Open(auditLog)
	if err != nil {
		b.Fatalf("opening the audit log: %v", err)
	}
	defer func() { _ = f.Close() }()
	agents, err := compare.UserAgents(f)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("writers in the audit log: %v", agents)
}

func deleteNamespace(b *testing.B, ctx context.Context, cs kubernetes.Interface, ns string) {
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		b.Fatalf("deleting namespace %s: %v", ns, err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("namespace %s still there after 10 minutes", ns)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
