package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// childEnv makes the test binary, instead of running tests, start a node
// with a running Pod and wait to be killed: the process
// TestCleanupAfterKill kills. Its value is the image tarball.
const childEnv = "STEPWISE_REALNODE_CHILD_IMAGES"

func TestMain(m *testing.M) {
	if images := os.Getenv(childEnv); images != "" {
		if err := runDoomedNode(images); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runDoomedNode(images string) error {
	ctx := context.Background()
	n, err := Start(ctx, Options{Images: []string{images}})
	if err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "doomed"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: DemoImage + ":v1", ImagePullPolicy: corev1.PullNever,
		}}},
	}
	if _, err := n.Clientset.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := poll(ctx, 2*time.Minute, "Pod doomed to run", func() (bool, error) {
		p, err := n.Clientset.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		return err
	}
	fmt.Println("CHILD READY")
	time.Sleep(10 * time.Minute)
	return errors.New("not killed within 10 minutes")
}

// TestCleanupAfterKill kills (SIGKILL) a test process whose node runs a
// Pod, so that its kubelet, containerd, shims, mounts and bridge stay
// behind, and checks that Cleanup, which every Start runs first, removes
// all of them.
func TestCleanupAfterKill(t *testing.T) {
	root, err := envtestenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(t.TempDir(), "images.tar")
	if err := BuildImages(t.Context(), root, images); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0])
	child.Env = append(os.Environ(), childEnv+"="+images)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	ready := false
	var lines []string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		lines = append(lines, sc.Text())
		if sc.Text() == "CHILD READY" {
			ready = true
			break
		}
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	if !ready {
		t.Fatalf("the child never got its node and Pod running:\n%s", strings.Join(lines, "\n"))
	}

	left := pidsNaming(StateDir)
	if len(left) == 0 || len(mountsUnder(t, StateDir)) == 0 || !bridgeExists() {
		t.Fatalf("killing the child left nothing to clean up (pids %v, containers %v, mounts %d, bridge %t): the test proves nothing",
			left, kubepodsPIDs(), len(mountsUnder(t, StateDir)), bridgeExists())
	}
	t.Logf("left behind: %d processes naming %s, %d container processes, %d mounts, bridge %s",
		len(left), StateDir, len(kubepodsPIDs()), len(mountsUnder(t, StateDir)), Bridge)

	if err := Cleanup(t.Logf); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if pids := pidsNaming(StateDir); len(pids) > 0 {
		t.Errorf("processes naming %s survive: %v", StateDir, pids)
	}
	if pids := kubepodsPIDs(); len(pids) > 0 {
		t.Errorf("container processes survive: %v", pids)
	}
	if m := mountsUnder(t, StateDir); len(m) > 0 {
		t.Errorf("mounts survive: %v", m)
	}
	if bridgeExists() {
		t.Errorf("bridge %s survives", Bridge)
	}
}

func mountsUnder(t *testing.T, dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(unescapeMount(f[4]), dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

func bridgeExists() bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", Bridge))
	return err == nil
}
