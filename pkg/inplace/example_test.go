package inplace_test

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/stepwise-dev/stepwise/pkg/inplace"
)

// Only a container's image changed: the Pod can be updated in place. A
// changed environment variable cannot, and the error names the field.
func ExampleCalculateSpec() {
	template := func(image, level string) *corev1.PodTemplateSpec {
		return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: image, Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: level}},
		}}}}
	}
	spec, err := inplace.CalculateSpec(template("web:1.0.0", "info"), template("web:1.1.0", "info"))
	fmt.Println(spec.ContainerImages, err)

	_, err = inplace.CalculateSpec(template("web:1.0.0", "info"), template("web:1.0.0", "debug"))
	var notInPlace *inplace.NotInPlaceError
	fmt.Println(errors.As(err, &notInPlace), err)
	// Output:
	// map[web:web:1.1.0] <nil>
	// true spec.containers[web].env cannot change in place
}
