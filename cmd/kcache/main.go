// Kcache inspects and trims gocompile's compiled-artifact cache.
//
// Usage:
//
//	kcache [-dir D] list
//	kcache [-dir D] stats
//	kcache [-dir D] prune -max-bytes N
//	kcache [-dir D] clear
//	kcache help [command]
//
// The directory defaults to $GOCOMPILE_CACHE_DIR, or gocompile in the
// user's cache directory; -dir may come before or after the command.
//
// list prints each entry's function and kernel, kind, size, the time since
// it was last used and key, most recent first. The function is the
// compiled function that stored the entry and the kernel what it holds
// ("-" where none applies, "unknown" for entries stored before entries
// recorded them). stats sums the entries up; prune removes the least
// recently used entries until the rest take at most N bytes (N may end in
// K, M or G, powers of 1024); clear removes every entry. Other processes
// may use the cache meanwhile.
//
// -h, before or after a command, prints its usage.
package main

import (
	"cmp"
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

const usage = `usage: kcache [-dir D] <command> [flags]

Commands:
  list    list the entries: function, kernel, kind, size, age and key
  stats   sum the entries up, by kind
  prune   remove the least recently used entries: prune -max-bytes N
  clear   remove every entry
  help    print this, or a command's usage: help <command>

Flags, before or after the command:
`

// commandUsage is each command's usage, before its flags.
var commandUsage = map[string]string{
	"list": `usage: kcache list [-dir D]

List the entries, most recently used first: the compiled function that
stored each and the kernel it holds ("-" where none applies, "unknown" for
entries stored before entries recorded them), its kind, size, age and key.

Flags:
`,
	"stats": `usage: kcache stats [-dir D]

Sum the entries up, by kind.

Flags:
`,
	"prune": `usage: kcache prune [-dir D] -max-bytes N

Remove the least recently used entries until the rest take at most N bytes.

Flags:
`,
	"clear": `usage: kcache clear [-dir D]

Remove every entry.

Flags:
`,
}

// run runs kcache with args and returns its exit status: 0, 1 when the
// cache cannot be read or changed, or 2 for a bad command line.
func run(args []string, stdout, stderr io.Writer) int {
	var dir string
	var maxBytes int64 = -1
	// flags makes the flags of a command (the global ones for ""): -dir
	// goes before or after the command.
	flags := func(cmd string) *flag.FlagSet {
		fl := flag.NewFlagSet(strings.TrimSpace("kcache "+cmd), flag.ContinueOnError)
		fl.StringVar(&dir, "dir", dir, "use `D` as the cache directory (default $GOCOMPILE_CACHE_DIR, or gocompile in the user cache directory)")
		if cmd == "prune" {
			fl.Func("max-bytes", "keep at most `N` bytes of entries (N may end in K, M or G: powers of 1024)", func(s string) error {
				n, err := parseSize(s)
				maxBytes = n
				return err
			})
		}
		return fl
	}
	// parse parses args into fl; done reports that the command line ends
	// the run, with code: -h prints the usage to stdout, a bad flag prints
	// the error and the usage to stderr.
	parse := func(fl *flag.FlagSet, text string, args []string) (code int, done bool) {
		fl.SetOutput(stderr)
		fl.Usage = func() {} // printed below, where it belongs
		switch err := fl.Parse(args); {
		case errors.Is(err, flag.ErrHelp):
			printUsage(stdout, fl, text)
			return 0, true
		case err != nil:
			printUsage(stderr, fl, text)
			return 2, true
		}
		return 0, false
	}
	global := flags("")
	if code, done := parse(global, usage, args); done {
		return code
	}
	if global.NArg() == 0 {
		printUsage(stderr, global, usage)
		return 2
	}
	cmd, rest := global.Arg(0), global.Args()[1:]
	if cmd == "help" {
		switch {
		case len(rest) == 0:
			printUsage(stdout, global, usage)
			return 0
		case len(rest) == 1 && commandUsage[rest[0]] != "":
			printUsage(stdout, flags(rest[0]), commandUsage[rest[0]])
			return 0
		}
		fmt.Fprintf(stderr, "kcache: help takes one command: %s\n\n", strings.Join(rest, " "))
		printUsage(stderr, global, usage)
		return 2
	}
	text, ok := commandUsage[cmd]
	if !ok {
		fmt.Fprintf(stderr, "kcache: unknown command %q\n\n", cmd)
		printUsage(stderr, global, usage)
		return 2
	}
	fl := flags(cmd)
	if code, done := parse(fl, text, rest); done {
		return code
	}
	if fl.NArg() != 0 {
		fmt.Fprintf(stderr, "kcache: %s takes no arguments: %s\n\n", cmd, strings.Join(fl.Args(), " "))
		printUsage(stderr, fl, text)
		return 2
	}
	if cmd == "prune" && maxBytes < 0 {
		fmt.Fprintf(stderr, "kcache: prune needs -max-bytes\n\n")
		printUsage(stderr, fl, text)
		return 2
	}
	if dir == "" {
		d, err := kcache.DefaultDir()
		if err != nil {
			fmt.Fprintln(stderr, "kcache:", err)
			return 1
		}
		dir = d
	}

	// Opening creates the directory; looking at one that is not there
	// should not.
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdout, "no cache in %s\n", dir)
		return 0
	}
	c := kcache.Open(dir)
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

// printUsage writes text and then fl's flags to w.
func printUsage(w io.Writer, fl *flag.FlagSet, text string) {
	fmt.Fprint(w, text)
	fl.SetOutput(w)
	fl.PrintDefaults()
}

func list(w io.Writer, c *kcache.Cache) error {
	infos, err := c.Entries()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FUNCTION\tKERNEL\tKIND\tSIZE\tAGE\tKEY")
	now := time.Now()
	for _, info := range infos {
		fn, name := labels(info)
		kind := info.Kind
		if info.Err != nil {
			kind = "invalid: " + info.Err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", fn, name, kind, formatSize(info.Size), formatAge(now.Sub(info.ModTime)), info.Key)
	}
	return tw.Flush()
}

// labels returns what list shows of the function and kernel of an entry:
// "unknown" for both when it records neither (it was stored before
// entries recorded them, or it is unreadable), "-" for one it leaves
// empty (a kernel of no compiled function, a layout of no one kernel).
func labels(info kcache.EntryInfo) (fn, name string) {
	if info.Func == "" && info.Name == "" {
		return "unknown", "unknown"
	}
	fn, name = cmp.Or(info.Func, "-"), cmp.Or(info.Name, "-")
	// A tab or newline would break the columns.
	clean := strings.NewReplacer("\t", " ", "\n", " ")
	return clean.Replace(fn), clean.Replace(name)
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
