// Command gen writes the embedded schema and Terraform mapping that the provider's
// published module leaves out (upstream makes them with a `go generate` step that
// never reaches the module proxy). It mirrors upstream's generate.go: the schema
// with its version set, and the mapping compacted.
package main

import (
	"bytes"
	"encoding/json"
	"log"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 4 {
		log.Fatal("usage: gen <provider cmd dir> <version> <out dir>")
	}
	src, version, out := os.Args[1], os.Args[2], os.Args[3]

	var schema map[string]json.RawMessage
	readJSON(filepath.Join(src, "schema.json"), &schema)
	v, _ := json.Marshal(version)
	schema["version"] = v
	writeJSON(filepath.Join(out, "schema-embed.json"), schema)

	raw, err := os.ReadFile(filepath.Join(src, "terraform-mapping.json"))
	if err != nil {
		log.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		log.Fatalf("terraform-mapping.json: %v", err)
	}
	if err := os.WriteFile(filepath.Join(out, "terraform-mapping-embed.json"), compact.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}

func readJSON(path string, v any) {
	raw, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		log.Fatalf("%s: %v", path, err)
	}
}

func writeJSON(path string, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		log.Fatal(err)
	}
}
