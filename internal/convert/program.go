package convert

import (
	"bytes"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// A PKO Program is a Pulumi YAML program kept in the cluster; PKO serves it
// as an artifact holding one Pulumi.yaml: the Program's name as the project
// name, runtime yaml, and the program's fields as they are (PKO's field names
// are Pulumi YAML's). Stackpilot has no Program kind, so the conversion writes
// that Pulumi.yaml into a directory for the user to commit or push.

func (c *converter) convertProgram(obj pkoObject) error {
	name := obj.Metadata.Name
	if name == "" {
		return fmt.Errorf("a pulumi.com Program has no metadata.name")
	}
	key := obj.Metadata.Namespace + "/" + name
	if _, dup := c.programs[key]; dup {
		return fmt.Errorf("%s appears twice in the input", objectName("Program", obj.Metadata))
	}
	for _, p := range c.programs {
		if p.Dir == name {
			return fmt.Errorf("two Programs, %s/%s and %s, are both named %s: convert them separately, with different --program-dir", p.Namespace, p.Name, key, name)
		}
	}
	yml, err := pulumiYAML(name, obj.Program)
	if err != nil {
		return fmt.Errorf("%s: %w", objectName("Program", obj.Metadata), err)
	}
	p := Program{Namespace: obj.Metadata.Namespace, Name: name, Dir: name, PulumiYAML: yml}
	c.res.Programs = append(c.res.Programs, p)
	c.programs[key] = p
	return nil
}

// program finds the Program a Stack of namespace ns names. A manifest without
// a namespace goes to the namespace it is applied to, so a Program or a Stack
// without one pairs with its namesake in any namespace (names are unique in
// one conversion: convertProgram refuses two Programs of one name); with
// both namespaces set, they must be equal, as in PKO.
func (c *converter) program(ns, name string) (Program, bool) {
	if p, ok := c.programs[ns+"/"+name]; ok {
		return p, true
	}
	for _, p := range c.programs {
		if p.Name == name && (p.Namespace == "" || ns == "") {
			return p, true
		}
	}
	return Program{}, false
}

// pulumiYAML renders the project file: name and runtime first, for people
// reading it, then the program's fields.
func pulumiYAML(name string, program json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	head, err := yaml.Marshal(map[string]string{"name": name})
	if err != nil {
		return nil, err
	}
	buf.Write(head)
	buf.WriteString("runtime: yaml\n")
	if len(bytes.TrimSpace(program)) == 0 || string(program) == "null" {
		return buf.Bytes(), nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(program, &fields); err != nil {
		return nil, fmt.Errorf("program is not an object: %w", err)
	}
	delete(fields, "name") // the project is named after the Program, as PKO does
	delete(fields, "runtime")
	if len(fields) == 0 {
		return buf.Bytes(), nil
	}
	body, err := yaml.Marshal(fields)
	if err != nil {
		return nil, err
	}
	buf.Write(body)
	return buf.Bytes(), nil
}
