// Kcache inspects and trims gocompile's compiled-artifact cache.
//
// Usage:
//
//	kcache [-dir D] list
//	kcache [-dir D] stats
//	kcache [-dir D] prune -max-bytes N
//	kcache [-dir D] clear
//
// The directory defaults to $GOCOMPILE_CACHE_DIR, or gocompile in the
// user's cache directory. list prints each entry's key, kind, size and
// the time since it was last used, most recent first; stats sums them up;
// prune removes the least recently used entries until the rest take at
// most N bytes (N may end in K, M or G, powers of 1024); clear removes
// every entry. Other processes may use the cache meanwhile.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gocompile/kcache"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = "usage: kcache [-dir D] list|stats|prune -max-bytes N|clear\n"

// run runs the command with args and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kcache", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprint(stderr, usage)
		fl.PrintDefaults()
	}
	dir := fl.String("dir", "", "cache directory (default $GOCOMPILE_CACHE_DIR or the user cache directory's gocompile)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() == 0 {
		fl.Usage()
		return 2
	}
	if *dir == "" {
		d, err := kcache.DefaultDir()
		if err != nil {
			fmt.Fprintln(stderr, "kcache:", err)
			return 1
		}
		*dir = d
	}
	cmd, rest := fl.Arg(0), fl.Args()[1:]
	var maxBytes int64 = -1
	switch cmd {
	case "list", "stats", "clear":
		if len(rest) != 0 {
			fmt.Fprintf(stderr, "kcache: %s takes no arguments\n%s", cmd, usage)
			return 2
		}
	case "prune":
		pf := flag.NewFlagSet("kcache prune", flag.ContinueOnError)
		pf.SetOutput(stderr)
		size := pf.String("max-bytes", "", "keep at most this many bytes of entries (suffixes K, M, G)")
		if err := pf.Parse(rest); err != nil {
			return 2
		}
		n, err := parseSize(*size)
		if err != nil || pf.NArg() != 0 {
			fmt.Fprintf(stderr, "kcache: prune needs -max-bytes N\n%s", usage)
			return 2
		}
		maxBytes = n
	default:
		fmt.Fprintf(stderr, "kcache: unknown command %q\n%s", cmd, usage)
		return 2
	}

	// Opening creates the directory; looking at one that is not there
	// should not.
	if _, err := os.Stat(*dir); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdout, "no cache in %s\n", *dir)
		return 0
	}
	c := kcache.Open(*dir)
	var err error
	switch cmd {
	case "list":
		err = list(stdout, c)
	case "stats":
		err = stats(stdout, c)
	case "prune":
		var n int
		var freed int64
		n, freed, err = c.Prune(maxBytes)
		if err == nil {
			fmt.Fprintf(stdout, "removed %d entries, %s\n", n, formatSize(freed))
		}
	case "clear":
		if err = c.Clear(); err == nil {
			fmt.Fprintf(stdout, "cleared %s\n", c.Dir())
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "kcache:", err)
		return 1
	}
	return 0
}

func list(w io.Writer, c *kcache.Cache) error {
	infos, err := c.Entries()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tSIZE\tAGE")
	now := time.Now()
	for _, info := range infos {
		kind := info.Kind
		if info.Err != nil {
			kind = "invalid: " + info.Err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", info.Key, kind, formatSize(info.Size), formatAge(now.Sub(info.ModTime)))
	}
	return tw.Flush()
}

func stats(w io.Writer, c *kcache.Cache) error {
	infos, err := c.Entries()
	if err != nil {
		return err
	}
	type sum struct {
		n     int
		bytes int64
	}
	kinds := map[string]*sum{}
	var total sum
	var oldest, newest time.Time
	for _, info := range infos {
		kind := info.Kind
		if info.Err != nil {
			kind = "(invalid)"
		}
		s := kinds[kind]
		if s == nil {
			s = new(sum)
			kinds[kind] = s
		}
		s.n++
		s.bytes += info.Size
		total.n++
		total.bytes += info.Size
		if oldest.IsZero() || info.ModTime.Before(oldest) {
			oldest = info.ModTime
		}
		if info.ModTime.After(newest) {
			newest = info.ModTime
		}
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "directory\t%s\n", c.Dir())
	fmt.Fprintf(tw, "writable\t%v\n", c.Stats().DiskWritable)
	fmt.Fprintf(tw, "entries\t%d\n", total.n)
	fmt.Fprintf(tw, "size\t%s (%d bytes; default limit %s)\n", formatSize(total.bytes), total.bytes, formatSize(kcache.DefaultDiskLimit))
	if total.n > 0 {
		now := time.Now()
		fmt.Fprintf(tw, "last used\t%s ago (least recently: %s ago)\n", formatAge(now.Sub(newest)), formatAge(now.Sub(oldest)))
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(tw, "  %s\t%d entries, %s\n", k, kinds[k].n, formatSize(kinds[k].bytes))
	}
	return tw.Flush()
}

// units are the suffixes parseSize accepts, in powers of 1024.
var units = map[string]int64{
	"": 1, "B": 1,
	"K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10,
	"M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
	"G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30,
	"T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40,
}

// parseSize parses a byte count such as 1073741824, 512M or 1GiB.
func parseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	num, unit := t, ""
	if i := strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	mult, ok := units[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func formatAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(max(d, 0)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
