// Command simanswer prints the origin simulator's deterministic answer to each prompt it reads,
// one prompt a line on standard input, one answer a line on standard output, so that scripts
// (examples/compose/ci.sh, scripts/chaos, scripts/soak) check what the pool returned against
// what the simulator must have said (codextest.Answer).
//
//	go run ./scripts/simanswer [--words N] < prompts.txt > answers.txt
//
// --words is the simulator's --words (0 = codextest.DefaultWords). A prompt cannot contain a
// newline here; the scripts use one-line prompts.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/codexpool/codexpool/worker/codextest"
)

func main() {
	words := flag.Int("words", 0, "the simulator's answer length in words (0 = its default)")
	flag.Parse()
	if err := run(*words); err != nil {
		fmt.Fprintln(os.Stderr, "simanswer:", err)
		os.Exit(1)
	}
}

func run(words int) error {
	if words <= 0 {
		words = codextest.DefaultWords
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 64<<10), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		fmt.Fprintln(out, codextest.Answer(in.Text(), words))
	}
	if err := in.Err(); err != nil {
		return err
	}
	return out.Flush()
}
