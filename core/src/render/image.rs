//! Container image references (`[registry/]repository[:tag][@digest]`) and the image overrider.
//!
//! Must not: touch anything but the `image` strings of the containers it is pointed at.

use crate::policy::ImageOverride;

/// A parsed image reference. The registry is the first path component when it looks like a
/// host (contains '.' or ':' or is "localhost"), as Docker decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageRef {
    pub registry: Option<String>,
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl ImageRef {
    pub fn parse(image: &str) -> ImageRef {
        let (rest, digest) = match image.split_once('@') {
            Some((r, d)) => (r, Some(d.to_string())),
            None => (image, None),
        };
        let (registry, path) = match rest.split_once('/') {
            Some((first, tail))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (Some(first.to_string()), tail)
            }
            _ => (None, rest),
        };
        // A ':' after the last '/' separates the tag.
        let last_slash = path.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match path[last_slash..].rfind(':') {
            Some(i) => (
                &path[..last_slash + i],
                Some(path[last_slash + i + 1..].to_string()),
            ),
            None => (path, None),
        };
        ImageRef {
            registry,
            repository: repository.to_string(),
            tag,
            digest,
        }
    }

    pub fn apply(&mut self, ov: &ImageOverride) {
        if let Some(reg) = &ov.registry {
            self.registry = (!reg.is_empty()).then(|| reg.clone());
        }
        if let Some(repo) = &ov.repository {
            self.repository = repo.clone();
        }
        if let Some(tag) = &ov.tag {
            self.tag = Some(tag.clone());
            self.digest = None;
        }
    }
}

impl std::fmt::Display for ImageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(r) = &self.registry {
            write!(f, "{r}/")?;
        }
        f.write_str(&self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_round_trip() {
        for s in [
            "nginx",
            "nginx:1.25",
            "library/nginx:1.25",
            "docker.io/library/nginx:1.25",
            "localhost:5000/app:v1",
            "localhost/app",
            "gcr.io/p/app@sha256:abc",
            "reg.example.com:443/team/app:2@sha256:def",
        ] {
            assert_eq!(ImageRef::parse(s).to_string(), s);
        }
        let r = ImageRef::parse("localhost:5000/team/app:v1");
        assert_eq!(r.registry.as_deref(), Some("localhost:5000"));
        assert_eq!(r.repository, "team/app");
        assert_eq!(r.tag.as_deref(), Some("v1"));
    }

    #[test]
    fn override_parts() {
        let mut r = ImageRef::parse("docker.io/library/nginx@sha256:abc");
        r.apply(&ImageOverride {
            container: None,
            registry: Some("mirror.eu".into()),
            repository: None,
            tag: Some("1.27".into()),
        });
        assert_eq!(r.to_string(), "mirror.eu/library/nginx:1.27");
        r.apply(&ImageOverride {
            registry: Some(String::new()),
            ..Default::default()
        });
        assert_eq!(r.to_string(), "library/nginx:1.27");
    }
}
