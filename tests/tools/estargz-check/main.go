// estargz-check opens an eStargz or zstd:chunked layer blob with the estargz
// library of containerd's stargz snapshotter (Debian's
// golang-github-containerd-stargz-snapshotter-dev), as a lazy-pulling client
// would: it reads the footer and the table of contents, checks the TOC
// against the digest the layer descriptor's annotations give, checks every
// chunk of every file against the TOC's digests, and reads files by range
// through io.SectionReader. With -tree, each file is also compared with the
// file of the same name under that directory.
//
//	estargz-check -blob FILE -toc-digest sha256:... [-tree DIR] [-read NAME]
//	estargz-check -zstd-chunked -blob FILE -manifest-checksum sha256:... \
//	    -manifest-position OFF:LEN:ULEN:1 [-tree DIR] [-read NAME]
//
// Built offline in GOPATH mode: GO111MODULE=off GOPATH=/usr/share/gocode.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/stargz-snapshotter/estargz"
	"github.com/containerd/stargz-snapshotter/estargz/zstdchunked"
	digest "github.com/opencontainers/go-digest"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "estargz-check: FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	blob := flag.String("blob", "", "the layer blob")
	zstdChunked := flag.Bool("zstd-chunked", false, "the blob is zstd:chunked, not eStargz")
	tocDigest := flag.String("toc-digest", "", "eStargz: the containerd.io/snapshot/stargz/toc.digest annotation")
	manifestChecksum := flag.String("manifest-checksum", "", "zstd:chunked: the manifest-checksum annotation")
	manifestPosition := flag.String("manifest-position", "", "zstd:chunked: the manifest-position annotation")
	tree := flag.String("tree", "", "a directory holding the layer's files, to compare contents with")
	read := flag.String("read", "", "a file to read by ranges")
	prefetch := flag.String("prefetch", "", "eStargz: files (comma-separated) that must lie before the prefetch landmark")
	flag.Parse()
	if *blob == "" {
		fail("-blob is required")
	}
	f, err := os.Open(*blob)
	if err != nil {
		fail("%v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		fail("%v", err)
	}
	sr := io.NewSectionReader(f, 0, st.Size())

	var opts []estargz.OpenOption
	if *zstdChunked {
		opts = append(opts, estargz.WithDecompressors(new(zstdchunked.Decompressor)))
	}
	r, err := estargz.Open(sr, opts...)
	if err != nil {
		fail("open: %v", err)
	}

	var want digest.Digest
	if *zstdChunked {
		// The annotations name the compressed manifest and its sha256, as
		// containers/storage reads them; the TOC the library parsed must be
		// the one at that position.
		var off, length, ulen, typ int64
		if _, err := fmt.Sscanf(*manifestPosition, "%d:%d:%d:%d", &off, &length, &ulen, &typ); err != nil || typ != 1 {
			fail("manifest position %q: %v (type %d)", *manifestPosition, err, typ)
		}
		compressed := make([]byte, length)
		if _, err := sr.ReadAt(compressed, off); err != nil {
			fail("read the manifest: %v", err)
		}
		sum := sha256.Sum256(compressed)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != *manifestChecksum {
			fail("manifest checksum %s, annotation says %s", got, *manifestChecksum)
		}
		dec, err := new(zstdchunked.Decompressor).DecompressTOC(bytes.NewReader(compressed))
		if err != nil {
			fail("decompress the manifest: %v", err)
		}
		plain, err := io.ReadAll(dec)
		if err != nil || int64(len(plain)) != ulen {
			fail("manifest of %d bytes, position says %d (%v)", len(plain), ulen, err)
		}
		want = digest.FromBytes(plain)
	} else {
		if want, err = digest.Parse(*tocDigest); err != nil {
			fail("toc digest %q: %v", *tocDigest, err)
		}
	}
	verifier, err := r.VerifyTOC(want)
	if err != nil {
		fail("verify TOC: %v", err)
	}

	files, chunks := 0, 0
	var walk func(dir string, e *estargz.TOCEntry)
	walk = func(dir string, e *estargz.TOCEntry) {
		e.ForeachChild(func(base string, c *estargz.TOCEntry) bool {
			name := filepath.Join(dir, base)
			switch c.Type {
			case "dir":
				walk(name, c)
			case "reg":
				if base == estargz.NoPrefetchLandmark || base == estargz.PrefetchLandmark {
					return true
				}
				files++
				chunks += checkFile(r, verifier, name, c, *tree)
			}
			return true
		})
	}
	root, ok := r.Lookup("")
	if !ok {
		fail("the TOC has no root")
	}
	walk("", root)

	if *prefetch != "" {
		// The snapshotter fetches the layer up to the landmark's offset at once.
		lm, ok := r.Lookup(estargz.PrefetchLandmark)
		if !ok {
			fail("no %s entry", estargz.PrefetchLandmark)
		}
		names := strings.Split(*prefetch, ",")
		for _, name := range names {
			e, ok := r.Lookup(name)
			if !ok || e.Offset >= lm.Offset {
				fail("%s is not before the prefetch landmark (at %d)", name, lm.Offset)
			}
		}
		fmt.Printf("prefetch: %d files before the landmark at offset %d\n", len(names), lm.Offset)
	}

	if *read != "" {
		readRanges(r, *read, *tree)
	}
	fmt.Printf("estargz-check: ok: %d files, %d chunks verified\n", files, chunks)
}

// checkFile checks each chunk of a file against its chunk digest (the
// library's verifier), the whole content against the file's digest, and,
// given a tree, against the file there.
func checkFile(r *estargz.Reader, v estargz.TOCEntryVerifier, name string, e *estargz.TOCEntry, tree string) int {
	fr, err := r.OpenFile(name)
	if err != nil {
		fail("open %s: %v", name, err)
	}
	n := 0
	for off := int64(0); off < e.Size; {
		ce, ok := r.ChunkEntryForOffset(name, off)
		if !ok {
			fail("%s: no chunk at offset %d", name, off)
		}
		cv, err := v.Verifier(ce)
		if err != nil {
			fail("%s: %v", name, err)
		}
		if _, err := io.Copy(cv, io.NewSectionReader(fr, ce.ChunkOffset, ce.ChunkSize)); err != nil {
			fail("%s: read chunk at %d: %v", name, ce.ChunkOffset, err)
		}
		if !cv.Verified() {
			fail("%s: chunk at %d (%d bytes) does not match its digest", name, ce.ChunkOffset, ce.ChunkSize)
		}
		off = ce.ChunkOffset + ce.ChunkSize
		n++
	}
	content, err := io.ReadAll(io.NewSectionReader(fr, 0, e.Size))
	if err != nil {
		fail("%s: read: %v", name, err)
	}
	if d := digest.FromBytes(content); e.Digest != "" && d.String() != e.Digest {
		fail("%s: content %s, TOC says %s", name, d, e.Digest)
	}
	if tree != "" {
		host, err := os.ReadFile(filepath.Join(tree, name))
		if err != nil {
			fail("%s: %v", name, err)
		}
		if !bytes.Equal(host, content) {
			fail("%s: content differs from %s", name, filepath.Join(tree, name))
		}
	}
	return n
}

// readRanges reads a file at a few ranges, as a lazy client does on demand.
func readRanges(r *estargz.Reader, name, tree string) {
	e, ok := r.Lookup(name)
	if !ok {
		fail("%s is not in the TOC", name)
	}
	fr, err := r.OpenFile(name)
	if err != nil {
		fail("open %s: %v", name, err)
	}
	var host []byte
	if tree != "" {
		if host, err = os.ReadFile(filepath.Join(tree, name)); err != nil {
			fail("%v", err)
		}
	}
	for _, frac := range []int64{0, 1, 2, 3} {
		off := e.Size * frac / 4
		size := e.Size / 3
		if off+size > e.Size {
			size = e.Size - off
		}
		buf := make([]byte, size)
		if _, err := fr.ReadAt(buf, off); err != nil && err != io.EOF {
			fail("%s: read %d bytes at %d: %v", name, size, off, err)
		}
		if host != nil && !bytes.Equal(buf, host[off:off+size]) {
			fail("%s: %d bytes at %d differ from the host file", name, size, off)
		}
	}
	fmt.Printf("estargz-check: read %s (%d bytes) by ranges\n", name, e.Size)
}
