package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestArchivesCarryNothingOfTheBuild: the same files in another order, at
// another time of day, give the same bytes; entries are sorted, owned by
// 0:0 without names, stamped with the given time; gzip carries no name or
// time.
func TestArchivesCarryNothingOfTheBuild(t *testing.T) {
	mtime := time.Unix(1796406670, 0)
	files := []file{
		{name: "kubectl-stepwise", mode: 0o755, data: []byte("binary")},
		{name: "LICENSE", mode: 0o644, data: []byte("licence")},
		{name: "blobs", mode: 0o755, dir: true},
	}
	reversed := slices.Clone(files)
	slices.Reverse(reversed)
	for _, tc := range []struct {
		name  string
		write func([]file, time.Time) ([]byte, error)
		read  func(*testing.T, []byte) []entry
	}{
		{"tar", plainTar, func(t *testing.T, b []byte) []entry { return tarEntries(t, bytes.NewReader(b)) }},
		{"tar.gz", tarGz, func(t *testing.T, b []byte) []entry {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if zr.Name != "" || !zr.ModTime.IsZero() {
				t.Errorf("gzip header name %q, time %s: want neither", zr.Name, zr.ModTime)
			}
			return tarEntries(t, zr)
		}},
		{"zip", zipped, func(t *testing.T, b []byte) []entry {
			zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			var out []entry
			for _, f := range zr.File {
				out = append(out, entry{name: f.Name, mode: int64(f.Mode().Perm()), mtime: f.Modified})
			}
			return out
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.write(files, mtime)
			if err != nil {
				t.Fatal(err)
			}
			b, err := tc.write(reversed, mtime)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Error("the same files in another order give other bytes")
			}
			if later, err := tc.write(files, mtime.Add(time.Hour)); err != nil || bytes.Equal(a, later) {
				t.Errorf("another time gives the same bytes (%v): the time is not written", err)
			}
			var names []string
			for _, e := range tc.read(t, a) {
				names = append(names, e.name)
				if !e.mtime.Equal(mtime) {
					t.Errorf("%s: time %s, want %s", e.name, e.mtime, mtime)
				}
				if e.uid != 0 || e.gid != 0 || e.uname != "" || e.gname != "" {
					t.Errorf("%s: owner %d:%d (%q:%q), want 0:0 unnamed", e.name, e.uid, e.gid, e.uname, e.gname)
				}
				if e.name == "kubectl-stepwise" && e.mode&0o111 == 0 {
					t.Errorf("%s: mode %o, not executable", e.name, e.mode)
				}
			}
			if !slices.IsSorted(names) {
				t.Errorf("entries %q are not sorted", names)
			}
		})
	}
}

type entry struct {
	name         string
	mode         int64
	mtime        time.Time
	uid, gid     int
	uname, gname string
}

func tarEntries(t *testing.T, r io.Reader) []entry {
	t.Helper()
	tr := tar.NewReader(r)
	var out []entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{name: strings.TrimSuffix(h.Name, "/"), mode: h.Mode, mtime: h.ModTime, uid: h.Uid, gid: h.Gid, uname: h.Uname, gname: h.Gname})
	}
}

func TestChecksumsAreSha256sumsFormatInNameOrder(t *testing.T) {
	got := string(checksums(map[string][]byte{"b.txt": []byte("b"), "a.txt": []byte("a")}))
	want := "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb  a.txt\n" +
		"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b.txt\n"
	if got != want {
		t.Errorf("checksums:\n%s\nwant:\n%s", got, want)
	}
}
