package sealed

import "golang.org/x/sys/unix"

// newSecret maps n bytes of anonymous memory outside the Go heap (the
// garbage collector never copies it), locks them so they never reach swap
// and excludes them from core dumps. When the mapping or the lock is
// refused, the bytes still work, unlocked.
func newSecret(n int) *Secret {
	size := max(n, 1)
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return &Secret{buf: make([]byte, n)}
	}
	_ = unix.Madvise(mem, unix.MADV_DONTDUMP)
	s := &Secret{buf: mem[:n], mem: mem}
	s.locked = unix.Mlock(mem) == nil
	return s
}

func release(s *Secret) {
	if s.mem == nil {
		return
	}
	if s.locked {
		_ = unix.Munlock(s.mem)
	}
	_ = unix.Munmap(s.mem)
	s.mem = nil
}
