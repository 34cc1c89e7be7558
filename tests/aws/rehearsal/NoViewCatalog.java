package lakehouse.rehearsal;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.SupportsNamespaces;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.hadoop.Configurable;
import org.apache.iceberg.jdbc.JdbcCatalog;

/**
 * Iceberg's JDBC catalog with its views cut off: the EMR rehearsal's stand-in for the Glue Data
 * Catalog. Iceberg's GlueCatalog is no ViewCatalog, so Spark's SparkCatalog lists no views and
 * refuses to create one; the same holds for this class, which delegates tables and namespaces
 * to a JdbcCatalog and implements nothing else.
 */
public class NoViewCatalog implements Catalog, SupportsNamespaces, Configurable<Object> {
  private final JdbcCatalog tables = new JdbcCatalog();

  @Override
  public void setConf(Object conf) {
    tables.setConf(conf);
  }

  @Override
  public void initialize(String name, Map<String, String> properties) {
    tables.initialize(name, properties);
  }

  @Override
  public String name() {
    return tables.name();
  }

  @Override
  public List<TableIdentifier> listTables(Namespace namespace) {
    return tables.listTables(namespace);
  }

  @Override
  public boolean dropTable(TableIdentifier identifier, boolean purge) {
    return tables.dropTable(identifier, purge);
  }

  @Override
  public void renameTable(TableIdentifier from, TableIdentifier to) {
    tables.renameTable(from, to);
  }

  @Override
  public Table loadTable(TableIdentifier identifier) {
    return tables.loadTable(identifier);
  }

  @Override
  public boolean tableExists(TableIdentifier identifier) {
    return tables.tableExists(identifier);
  }

  @Override
  public void invalidateTable(TableIdentifier identifier) {
    tables.invalidateTable(identifier);
  }

  @Override
  public Table registerTable(TableIdentifier identifier, String metadataLocation) {
    return tables.registerTable(identifier, metadataLocation);
  }

  @Override
  public Catalog.TableBuilder buildTable(TableIdentifier identifier, Schema schema) {
    return tables.buildTable(identifier, schema);
  }

  @Override
  public void createNamespace(Namespace namespace, Map<String, String> metadata) {
    tables.createNamespace(namespace, metadata);
  }

  @Override
  public List<Namespace> listNamespaces(Namespace namespace) {
    return tables.listNamespaces(namespace);
  }

  @Override
  public Map<String, String> loadNamespaceMetadata(Namespace namespace) {
    return tables.loadNamespaceMetadata(namespace);
  }

  @Override
  public boolean dropNamespace(Namespace namespace) {
    return tables.dropNamespace(namespace);
  }

  @Override
  public boolean setProperties(Namespace namespace, Map<String, String> properties) {
    return tables.setProperties(namespace, properties);
  }

  @Override
  public boolean removeProperties(Namespace namespace, Set<String> properties) {
    return tables.removeProperties(namespace, properties);
  }

  @Override
  public boolean namespaceExists(Namespace namespace) {
    return tables.namespaceExists(namespace);
  }
}
