package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// file is one entry of an archive: a directory when dir is set.
type file struct {
	name string
	mode int64
	dir  bool
	data []byte
}

// sorted returns files ordered by name, so an archive's bytes do not
// depend on the order they were gathered in.
func sorted(files []file) []file {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	return files
}

// writeTar writes files into w as a tar stream in name order, every entry
// owned by 0:0 with no user or group name and stamped with mtime: nothing
// of the machine that built it.
func writeTar(w io.Writer, files []file, mtime time.Time) error {
	tw := tar.NewWriter(w)
	for _, f := range sorted(files) {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: mtime.UTC(), Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, strings.TrimSuffix(f.name, "/")+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// tarGz is writeTar compressed with gzip, whose header then carries no
// name and no time.
func tarGz(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if err := writeTar(zw, files, mtime); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// plainTar is writeTar into memory.
func plainTar(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeTar(&buf, files, mtime); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// zipped writes files into a zip archive in name order, each deflated and
// stamped with mtime (what krew unpacks on Windows).
func zipped(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range sorted(files) {
		if f.dir {
			continue
		}
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: mtime.UTC()}
		h.SetMode(fs.FileMode(f.mode))
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// treeFiles reads the directory dir into archive entries named relative
// to it, directories included (an OCI layout, for its tarball).
func treeFiles(dir string) ([]file, error) {
	var files []file
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			files = append(files, file{name: rel, mode: 0o755, dir: true})
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, file{name: rel, mode: 0o644, data: data})
		return nil
	})
	return files, err
}

// sha256Hex is the hex SHA-256 of data, as sha256sum prints it.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// checksums is checksums.txt in sha256sum's format ("HEX  NAME"), one line
// per file in name order, for `sha256sum -c checksums.txt`.
func checksums(files map[string][]byte) []byte {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "%s  %s\n", sha256Hex(files[name]), name)
	}
	return []byte(b.String())
}
