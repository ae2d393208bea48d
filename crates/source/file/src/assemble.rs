//! The objects of all files → one `Objects`, the later file winning on duplicates.

use crate::object::Object;
use portico_model::{Diagnostic, ObjectRef};
use portico_translate::{ObjectKey, Objects};
use std::path::Path;

/// Builds `Objects` from each file's objects, in file order. An object defined twice (same
/// kind, namespace and name) keeps its later definition, and a warning names both origins.
///
/// Objects are shared, so this costs a pointer copy and a map insert per object; origins are
/// only turned into text for the (rare) duplicates.
pub(crate) fn assemble(files: &[(&Path, &[Object])]) -> (Objects, Vec<Diagnostic>) {
    let mut objects = Objects::default();
    let mut diagnostics = Vec::new();
    for (index, (origin, file_objects)) in files.iter().enumerate() {
        for (position, object) in file_objects.iter().enumerate() {
            if insert(&mut objects, object.clone()) {
                let object_ref = object.object_ref();
                let first = first_origin(&files[..=index], &object_ref, (index, position));
                diagnostics.push(duplicate(object_ref, &first, &origin.display().to_string()));
            }
        }
    }
    (objects, diagnostics)
}

/// The file of the latest definition of `object` before `before` (file index, position).
fn first_origin(
    files: &[(&Path, &[Object])],
    object: &ObjectRef,
    before: (usize, usize),
) -> String {
    let earlier = files
        .iter()
        .enumerate()
        .rev()
        .find(|(index, (_, objects))| {
            let end = if *index == before.0 {
                before.1
            } else {
                objects.len()
            };
            objects[..end].iter().any(|o| o.object_ref() == *object)
        });
    earlier.map_or_else(String::new, |(_, (path, _))| path.display().to_string())
}

fn duplicate(object: ObjectRef, first: &str, second: &str) -> Diagnostic {
    let message = if first == second {
        format!("defined twice in {first}; the later definition is used")
    } else {
        format!("defined in {first} and again in {second}; the one in {second} is used")
    };
    Diagnostic::warning(object, "", message)
}

/// Inserts `object`; true when it replaced one of the same kind, namespace and name.
fn insert(objects: &mut Objects, object: Object) -> bool {
    let meta = object.metadata();
    let name = meta.name.clone().unwrap_or_default();
    let key = ObjectKey {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: name.clone(),
    };
    match object {
        Object::Ingress(o) => objects.ingresses.insert(key, o).is_some(),
        Object::IngressClass(o) => objects.ingress_classes.insert(name, o).is_some(),
        Object::Service(o) => objects.services.insert(key, o).is_some(),
        Object::EndpointSlice(o) => objects.endpoint_slices.insert(key, o).is_some(),
        Object::Endpoints(o) => objects.endpoints.insert(key, o).is_some(),
        Object::Secret(o) => objects.secrets.insert(key, o).is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_documents;
    use portico_model::Severity;

    fn service(namespace: &str, name: &str, port: u16) -> Object {
        let text = format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{ports: [{{port: {port}}}]}}\n"
        );
        parse_documents("test", &text).objects.remove(0)
    }

    fn port(objects: &Objects, name: &str) -> i32 {
        let service = &objects.services[&ObjectKey::new("default", name)];
        service.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].port
    }

    #[test]
    fn the_later_file_wins_and_a_warning_names_both_files() {
        let a = [service("default", "web", 80)];
        let b = [service("default", "web", 8080)];
        let (objects, diagnostics) =
            assemble(&[(Path::new("a.yaml"), &a[..]), (Path::new("b.yaml"), &b[..])]);
        assert_eq!(port(&objects, "web"), 8080);
        assert_eq!(diagnostics.len(), 1);
        let d = &diagnostics[0];
        assert_eq!(d.severity, Severity::Warning);
        assert_eq!(d.object, ObjectRef::new("Service", "default", "web"));
        assert!(
            d.message.contains("a.yaml") && d.message.contains("b.yaml"),
            "{d}"
        );
    }

    #[test]
    fn same_name_in_other_namespaces_is_no_duplicate() {
        let a = [service("default", "web", 80), service("other", "web", 81)];
        let (objects, diagnostics) = assemble(&[(Path::new("a.yaml"), &a[..])]);
        assert_eq!(objects.services.len(), 2);
        assert!(diagnostics.is_empty());
    }

    #[test]
    fn a_duplicate_inside_one_file_keeps_the_later_document() {
        let a = [service("default", "web", 80), service("default", "web", 81)];
        let (objects, diagnostics) = assemble(&[(Path::new("a.yaml"), &a[..])]);
        assert_eq!(port(&objects, "web"), 81);
        assert!(diagnostics[0].message.contains("twice in a.yaml"));
    }
}
