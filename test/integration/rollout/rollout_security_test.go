package rollout_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// The manager's allow-list of Prometheus addresses: a metric naming another
// address, even a reachable Prometheus, gets Error measurements naming the
// flag, that Prometheus is never asked, and the rollout pauses as for any
// error. Pointed at an allowed address, the retried analysis passes.
func TestAnalysisAddressOutsideTheAllowListIsRefused(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createCloneSet(t, newCloneSet(ns, "web", 10, "1.0.0"))
	autopilot(t, ns, "web")
	startController(t, ns, func(o *managerSetup) { o.AnalysisAddresses = []string{promAddress} })
	env.prom.set(ns, answer{value: 0.001})

	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(1)
	ro.Spec.Analysis.ConsecutiveErrorLimit = new(int32(1))
	// The fake Prometheus itself, under an address the list does not name.
	ro.Spec.Analysis.Metrics[0].Prometheus.Address = env.prom.srv.URL
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	refused := "prometheus.address " + env.prom.srv.URL + " is not allowed by the manager's --analysis-allowed-addresses"
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisInconclusive))
		g.Expect(ro.Status.Message).To(ContainSubstring(refused))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventMeasurementError, refused)
	if n := env.prom.count(ns); n != 0 {
		t.Fatalf("the refused Prometheus was asked %d queries", n)
	}

	updateRollout(t, ns, "web", func(ro *stepwisev1.Rollout) {
		ro.Spec.Analysis.Metrics[0].Prometheus.Address = promAddress
	})
	annotate(t, ns, "web", stepwisev1.RetryAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	if env.prom.count(ns) == 0 {
		t.Error("the allowed Prometheus was never asked")
	}
}

// A Prometheus whose certificate is signed by a private CA is trusted
// through tls.caRef, from a ConfigMap or a Secret of the Rollout's
// namespace, read at each measurement: no insecureSkipVerify.
func TestPrivateCAIsReadFromItsReference(t *testing.T) {
	t.Parallel()
	for _, kind := range []stepwisev1.CAReferenceKind{stepwisev1.CAReferenceConfigMap, stepwisev1.CAReferenceSecret} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			ns := setup(t, true)
			env.prom.set(ns, answer{value: 0.001})
			ca := newTestCA(t)
			server := httptest.NewUnstartedServer(http.HandlerFunc(env.prom.query))
			server.TLS = &tls.Config{Certificates: []tls.Certificate{ca.serverCert(t, "127.0.0.1")}}
			server.StartTLS()
			t.Cleanup(server.Close)

			// First an empty key, which must not fall back to the system's
			// authorities.
			writeCA(t, ns, kind, "prom-ca", nil)
			ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(num(0)))
			ro.Spec.Analysis = errorRate(1)
			ro.Spec.Analysis.ConsecutiveErrorLimit = new(int32(0))
			ro.Spec.Analysis.Metrics[0].Prometheus.Address = server.URL
			ro.Spec.Analysis.Metrics[0].Prometheus.TLS = &stepwisev1.PrometheusTLS{
				CARef: &stepwisev1.CAReference{Kind: kind, Name: "prom-ca", Key: "ca.crt"},
			}
			createRollout(t, ro)
			eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
			commit(t, ns, "web", "2.0.0")
			eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
				g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisInconclusive))
				g.Expect(ro.Status.Message).To(ContainSubstring(`CA ` + string(kind) + ` prom-ca key "ca.crt" is empty`))
			})

			// Then another CA: the server is not trusted.
			writeCA(t, ns, kind, "prom-ca", newTestCA(t).certPEM)
			retried := annotate(t, ns, "web", stepwisev1.RetryAtAnnotation)
			eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
				g.Expect(ro.Status.LastHandledRetryAt).To(Equal(retried))
				g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisInconclusive))
				g.Expect(ro.Status.Message).To(ContainSubstring("certificate signed by unknown authority"))
			})

			// The right CA, read at the next measurement.
			writeCA(t, ns, kind, "prom-ca", ca.certPEM)
			annotate(t, ns, "web", stepwisev1.RetryAtAnnotation)
			done := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
				kstatusHealthy(g, ro)
				g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
			})
			last := done.Status.Measurements[len(done.Status.Measurements)-1]
			if last.Phase != stepwisev1.MeasurementSuccessful || last.Value != "0.001" {
				t.Errorf("last measurement %+v, want Successful with value 0.001", last)
			}
		})
	}
}

// writeCA creates or replaces a ConfigMap or Secret holding pem under
// ca.crt.
func writeCA(t *testing.T, ns string, kind stepwisev1.CAReferenceKind, name string, pem []byte) {
	t.Helper()
	ctx := testContext(t)
	var obj client.Object
	switch kind {
	case stepwisev1.CAReferenceConfigMap:
		obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"ca.crt": string(pem)}}
	default:
		obj = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"ca.crt": append([]byte{}, pem...)}}
	}
	err := env.client.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		err = env.client.Update(ctx, obj)
	}
	if err != nil {
		t.Fatalf("writing %s %s: %v", kind, name, err)
	}
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "stepwise test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serverCert is a leaf certificate for ip, signed by the CA.
func (ca *testCA) serverCert(t *testing.T, ip string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: ip},
		IPAddresses:  []net.IP{net.ParseIP(ip)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
