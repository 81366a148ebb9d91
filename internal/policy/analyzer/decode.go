package analyzer

import (
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/sig"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/stackpilot/stackpilot/internal/policy"
)

// Pulumi sends a resource's inputs as a protobuf Struct in which special
// values are objects carrying a signature key (sig.Key) and unknown values
// are strings of their own. decodeStruct reads that wire form into what
// rules see: JSON-like values, policy.Unknown for what the engine does not
// know yet and policy.Secret around secrets. (Pulumi's plugin package does
// the same, but importing it would link a terminal UI library and a Git
// implementation into the runner for a few dozen lines.)

// unknownValues are the strings that stand for an unknown value of each
// kind.
var unknownValues = map[string]bool{
	sig.UnknownBoolValue: true, sig.UnknownNumberValue: true, sig.UnknownStringValue: true,
	sig.UnknownArrayValue: true, sig.UnknownAssetValue: true, sig.UnknownArchiveValue: true,
	sig.UnknownObjectValue: true,
}

// decodeStruct reads a resource's inputs; the engine's internal keys
// ("__defaults" and the like) are left out.
func decodeStruct(s *structpb.Struct) map[string]any {
	out := map[string]any{}
	for k, v := range s.GetFields() {
		if strings.HasPrefix(k, "__") {
			continue
		}
		out[k] = decodeValue(v)
	}
	return out
}

func decodeValue(v *structpb.Value) any {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue, nil:
		return nil
	case *structpb.Value_BoolValue:
		return k.BoolValue
	case *structpb.Value_NumberValue:
		return k.NumberValue
	case *structpb.Value_StringValue:
		if unknownValues[k.StringValue] {
			return policy.Unknown{}
		}
		return k.StringValue
	case *structpb.Value_ListValue:
		items := k.ListValue.GetValues()
		out := make([]any, len(items))
		for i, e := range items {
			out[i] = decodeValue(e)
		}
		return out
	case *structpb.Value_StructValue:
		return decodeObject(k.StructValue.GetFields())
	}
	return nil
}

func decodeObject(fields map[string]*structpb.Value) any {
	signature, special := fields[sig.Key]
	if !special {
		out := make(map[string]any, len(fields))
		for k, e := range fields {
			out[k] = decodeValue(e)
		}
		return out
	}
	switch signature.GetStringValue() {
	case sig.Secret:
		return policy.Secret{Value: decodeValue(fields["value"])}
	case sig.OutputValue:
		// An output value without "value" is unknown; its dependencies do
		// not matter to a rule.
		value, known := fields["value"]
		if !known {
			return policy.Unknown{}
		}
		decoded := decodeValue(value)
		if fields["secret"].GetBoolValue() {
			return policy.Secret{Value: decoded}
		}
		return decoded
	case sig.ResourceReference:
		return fields["urn"].GetStringValue()
	case sig.ByteString:
		return fields["value"].GetStringValue()
	case sig.AssetSig, sig.ArchiveSig:
		// What identifies the asset, not its contents.
		out := map[string]any{}
		for _, k := range []string{"hash", "path", "uri"} {
			if e, ok := fields[k]; ok {
				out[k] = decodeValue(e)
			}
		}
		return out
	}
	// An unknown signature: the value as it came, signature included.
	out := make(map[string]any, len(fields))
	for k, e := range fields {
		out[k] = decodeValue(e)
	}
	return out
}
