//! The objects of all files → one `Objects`, the later file winning on duplicates.

use crate::object::Object;
use portico_model::{Diagnostic, ObjectRef};
use portico_translate::{ObjectKey, Objects};
use std::collections::HashMap;

/// Builds `Objects` from each file's objects, in file order. An object defined twice (same
/// kind, namespace and name) keeps its later definition, and a warning names both origins.
pub(crate) fn assemble<'a, I>(files: I) -> (Objects, Vec<Diagnostic>)
where
    I: IntoIterator<Item = (&'a str, &'a [Object])>,
{
    let mut objects = Objects::default();
    let mut origins: HashMap<ObjectRef, &'a str> = HashMap::new();
    let mut diagnostics = Vec::new();
    for (origin, file_objects) in files {
        for object in file_objects {
            let object_ref = object.object_ref();
            if let Some(first) = origins.insert(object_ref.clone(), origin) {
                diagnostics.push(duplicate(object_ref, first, origin));
            }
            insert(&mut objects, object.clone());
        }
    }
    (objects, diagnostics)
}

fn duplicate(object: ObjectRef, first: &str, second: &str) -> Diagnostic {
    let message = if first == second {
        format!("defined twice in {first}; the later definition is used")
    } else {
        format!("defined in {first} and again in {second}; the one in {second} is used")
    };
    Diagnostic::warning(object, "", message)
}

fn insert(objects: &mut Objects, object: Object) {
    let meta = object.metadata();
    let name = meta.name.clone().unwrap_or_default();
    let key = ObjectKey {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: name.clone(),
    };
    match object {
        Object::Ingress(o) => {
            objects.ingresses.insert(key, o);
        }
        Object::IngressClass(o) => {
            objects.ingress_classes.insert(name, o);
        }
        Object::Service(o) => {
            objects.services.insert(key, o);
        }
        Object::EndpointSlice(o) => {
            objects.endpoint_slices.insert(key, o);
        }
        Object::Endpoints(o) => {
            objects.endpoints.insert(key, o);
        }
        Object::Secret(o) => {
            objects.secrets.insert(key, o);
        }
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
        let (objects, diagnostics) = assemble([("a.yaml", &a[..]), ("b.yaml", &b[..])]);
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
        let (objects, diagnostics) = assemble([("a.yaml", &a[..])]);
        assert_eq!(objects.services.len(), 2);
        assert!(diagnostics.is_empty());
    }

    #[test]
    fn a_duplicate_inside_one_file_keeps_the_later_document() {
        let a = [service("default", "web", 80), service("default", "web", 81)];
        let (objects, diagnostics) = assemble([("a.yaml", &a[..])]);
        assert_eq!(port(&objects, "web"), 81);
        assert!(diagnostics[0].message.contains("twice in a.yaml"));
    }
}
