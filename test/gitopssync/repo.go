package gitopssync

import (
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Repo is a git repository held in memory, with one branch that tests
// commit to as people would, and that a Syncer reads commits from, as a
// GitOps source controller does: only what is committed is ever applied.
type Repo struct {
	mu   sync.Mutex
	repo *git.Repository
	fs   billy.Filesystem
}

// NewRepo initialises an empty repository.
func NewRepo() (*Repo, error) {
	fs := memfs.New()
	repo, err := git.Init(memory.NewStorage(), fs)
	if err != nil {
		return nil, fmt.Errorf("initialising git repository: %w", err)
	}
	return &Repo{repo: repo, fs: fs}, nil
}

// signature is the author of every commit. The time is what orders commits
// in a log; git's own resolution (seconds) is enough for that.
func signature() *object.Signature {
	return &object.Signature{Name: "Stepwise Tests", Email: "tests@stepwise.dev", When: time.Now()}
}

// Commit writes files (path in the repository to content) and commits them
// with message. An empty content removes the file. A commit that changes
// nothing is an error, as with git.
func (r *Repo) Commit(message string, files map[string]string) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	wt, err := r.repo.Worktree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if files[p] == "" {
			if _, err := wt.Remove(p); err != nil {
				return plumbing.ZeroHash, fmt.Errorf("removing %s: %w", p, err)
			}
			continue
		}
		if err := r.write(wt, p, []byte(files[p])); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	return r.commit(wt, message)
}

func (r *Repo) write(wt *git.Worktree, p string, data []byte) error {
	if err := r.fs.MkdirAll(path.Dir(p), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", p, err)
	}
	if err := util.WriteFile(r.fs, p, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if _, err := wt.Add(p); err != nil {
		return fmt.Errorf("adding %s: %w", p, err)
	}
	return nil
}

func (r *Repo) commit(wt *git.Worktree, message string) (plumbing.Hash, error) {
	h, err := wt.Commit(message, &git.CommitOptions{Author: signature()})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("committing %q: %w", message, err)
	}
	return h, nil
}

// ErrRevertConflict is returned by Revert when a later commit changed a
// file the reverted commit changed: git would need a merge, which this
// small repository does not do.
var ErrRevertConflict = errors.New("revert conflicts with a later commit")

// Revert commits the inverse of commit h, as `git revert h` does, with
// git's message. Each file h changed is put back as it was in h's parent
// (restored, rewritten or removed); every such file must still be as h left
// it, or ErrRevertConflict is returned.
func (r *Repo) Revert(h plumbing.Hash) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.repo.CommitObject(h)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading commit %s: %w", h, err)
	}
	if c.NumParents() != 1 {
		return plumbing.ZeroHash, fmt.Errorf("reverting %s: a commit with %d parents is not supported", h, c.NumParents())
	}
	parent, err := c.Parent(0)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	before, err := parent.Tree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	after, err := c.Tree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	changes, err := object.DiffTree(before, after)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("diffing %s with its parent: %w", h, err)
	}
	head, err := r.headTree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	wt, err := r.repo.Worktree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	for _, ch := range changes {
		from, to, err := ch.Files()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		name := ch.To.Name
		if name == "" {
			name = ch.From.Name
		}
		now, err := head.File(name)
		switch {
		case errors.Is(err, object.ErrFileNotFound):
			now = nil
		case err != nil:
			return plumbing.ZeroHash, err
		}
		if !sameFile(now, to) {
			return plumbing.ZeroHash, fmt.Errorf("%w: %s changed since %s", ErrRevertConflict, name, h)
		}
		if from == nil {
			if _, err := wt.Remove(name); err != nil {
				return plumbing.ZeroHash, fmt.Errorf("removing %s: %w", name, err)
			}
			continue
		}
		content, err := from.Contents()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if err := r.write(wt, name, []byte(content)); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	subject, _, _ := strings.Cut(c.Message, "\n")
	return r.commit(wt, fmt.Sprintf("Revert %q\n\nThis reverts commit %s.\n", subject, h))
}

func sameFile(a, b *object.File) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Hash == b.Hash
}

func (r *Repo) headTree() (*object.Tree, error) {
	ref, err := r.repo.Head()
	if err != nil {
		return nil, fmt.Errorf("reading HEAD: %w", err)
	}
	c, err := r.repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, err
	}
	return c.Tree()
}

// Head returns the commit at HEAD.
func (r *Repo) Head() (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, err := r.repo.Head()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading HEAD: %w", err)
	}
	return ref.Hash(), nil
}

// Snapshot is the content of a directory at one commit.
type Snapshot struct {
	Revision plumbing.Hash
	// Files maps paths, relative to the repository root, to contents.
	Files map[string][]byte
}

// Checkout reads every file under dir ("" or "." for all) at HEAD, from the
// commit objects, never from the worktree.
func (r *Repo) Checkout(dir string) (Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, err := r.repo.Head()
	if err != nil {
		return Snapshot{}, fmt.Errorf("reading HEAD: %w", err)
	}
	c, err := r.repo.CommitObject(ref.Hash())
	if err != nil {
		return Snapshot{}, err
	}
	tree, err := c.Tree()
	if err != nil {
		return Snapshot{}, err
	}
	prefix := strings.Trim(path.Clean(dir), "/")
	if prefix == "." {
		prefix = ""
	}
	snap := Snapshot{Revision: ref.Hash(), Files: map[string][]byte{}}
	err = tree.Files().ForEach(func(f *object.File) error {
		if prefix != "" && !strings.HasPrefix(f.Name, prefix+"/") {
			return nil
		}
		rd, err := f.Reader()
		if err != nil {
			return err
		}
		defer func() { _ = rd.Close() }()
		data, err := io.ReadAll(rd)
		if err != nil {
			return err
		}
		snap.Files[f.Name] = data
		return nil
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("reading the tree of %s: %w", ref.Hash(), err)
	}
	return snap, nil
}

// Message returns the first line of commit h's message, for logs.
func (r *Repo) Message(h plumbing.Hash) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.repo.CommitObject(h)
	if err != nil {
		return ""
	}
	subject, _, _ := strings.Cut(c.Message, "\n")
	return subject
}
