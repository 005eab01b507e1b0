package wire

// Unsupported is the text that stands in for a content part or block of a type the pool cannot
// carry (audio, a container upload, a type newer than the gateway), in every dialect alike: the
// request goes on, and the model is told something was left out.
func Unsupported(typ string) Part {
	return Text("input_text", "[unsupported content block omitted: "+typ+"]")
}
